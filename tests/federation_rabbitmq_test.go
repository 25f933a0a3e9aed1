package tests

import "testing"

// Federation between Warren and a private RabbitMQ 3.10.8 node, both
// ways: Warren's links consume from RabbitMQ, and RabbitMQ's federation
// plugin uses Warren as its upstream (declaring there the queue and the
// x-federation-upstream exchange its links need). The scenarios are
// federation_test.go's; one RabbitMQ node serves both directions, each
// in vhosts of its own.
func TestFederationWithRabbitMQ(t *testing.T) {
	r := rabbitFedNodes(t, 1)[0]
	w := warrenFedNodes(t, 1)[0]
	// RabbitMQ upstream, Warren downstream.
	t.Run("FromRabbitMQ/Exchange", func(t *testing.T) {
		s := fedSites(t, "fed-from-rabbitmq-x", w, r)
		fedExchangeScenario(t, s[0], s[1])
	})
	t.Run("FromRabbitMQ/Queue", func(t *testing.T) {
		s := fedSites(t, "fed-from-rabbitmq-q", w, r)
		fedQueueScenario(t, s[0], s[1])
	})
	// Warren upstream, RabbitMQ downstream.
	t.Run("ToRabbitMQ/Exchange", func(t *testing.T) {
		s := fedSites(t, "fed-to-rabbitmq-x", r, w)
		fedExchangeScenario(t, s[0], s[1])
	})
	t.Run("ToRabbitMQ/Queue", func(t *testing.T) {
		s := fedSites(t, "fed-to-rabbitmq-q", r, w)
		fedQueueScenario(t, s[0], s[1])
	})
}
