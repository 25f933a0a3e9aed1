package tests

import (
	"fmt"
	neturl "net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
)

// TestRabbitHole makes every call of rabbit-hole v2.12.0 (the Go client of
// RabbitMQ's management API that the Terraform provider and the
// Kubernetes operators are built on) whose feature Warren has. Each must
// answer without an error, against Warren and against RabbitMQ 3.10.8
// (WARREN_REFERENCE_ADMIN_URL) alike; a failure names the call.
func TestRabbitHole(t *testing.T) {
	m := startMgmt(t)
	rh, err := rabbithole.NewClient(m.base, "guest", "guest")
	if err != nil {
		t.Fatal(err)
	}
	rh.SetTimeout(time.Minute)
	vh := m.vhost
	user, other := uniq(t, "rh-user"), uniq(t, "rh-vhost")
	t.Cleanup(func() {
		m.call("DELETE", "/api/users/"+esc(user), "")
		m.call("DELETE", "/api/vhosts/"+esc(other), "")
		m.call("DELETE", "/api/global-parameters/rh-param", "")
	})

	// A connection with a channel and a consumer, for the calls that list
	// and close them.
	u, err := neturl.Parse(m.s.url)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + vh
	conn, err := amqp.Dial(u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("rh-consumed", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume("rh-consumed", "rh-tag", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	var connName, chanName string
	waitFor(t, "the connection listed", func() bool {
		cs, err := rh.ListVhostConnections(vh)
		if err != nil || len(cs) == 0 {
			return false
		}
		connName = cs[0].Name
		chs, err := rh.ListChannels()
		for _, c := range chs {
			if c.ConnectionDetails.Name == connName {
				chanName = c.Name
			}
		}
		return err == nil && chanName != ""
	})

	ok := func(_ any, err error) error { return err }
	calls := []struct {
		name string
		call func() error
	}{
		{"Overview", func() error { return ok(rh.Overview()) }},
		{"Whoami", func() error { return ok(rh.Whoami()) }},
		{"EnabledProtocols", func() error { return ok(rh.EnabledProtocols()) }},
		{"ProtocolPorts", func() error { return ok(rh.ProtocolPorts()) }},
		{"ListNodes", func() error { return ok(rh.ListNodes()) }},
		{"GetNode", func() error {
			ns, err := rh.ListNodes()
			if err != nil || len(ns) == 0 {
				return fmt.Errorf("no node: %v", err)
			}
			return ok(rh.GetNode(ns[0].Name))
		}},
		{"GetClusterName", func() error { return ok(rh.GetClusterName()) }},
		{"SetClusterName", func() error {
			cn, err := rh.GetClusterName()
			if err != nil {
				return err
			}
			return ok(rh.SetClusterName(*cn))
		}},
		{"ListFeatureFlags", func() error { return ok(rh.ListFeatureFlags()) }},
		{"EnableFeatureFlag", func() error { return ok(rh.EnableFeatureFlag("quorum_queue")) }},

		{"ListConnections", func() error { return ok(rh.ListConnections()) }},
		{"ListVhostConnections", func() error { return ok(rh.ListVhostConnections(vh)) }},
		{"GetConnection", func() error { return ok(rh.GetConnection(connName)) }},
		{"ListChannels", func() error { return ok(rh.ListChannels()) }},
		{"GetChannel", func() error { return ok(rh.GetChannel(chanName)) }},
		{"ListConsumers", func() error { return ok(rh.ListConsumers()) }},
		{"ListConsumersIn", func() error { return ok(rh.ListConsumersIn(vh)) }},

		{"PutVhost", func() error {
			return ok(rh.PutVhost(other, rabbithole.VhostSettings{Description: "d", Tags: rabbithole.VhostTags{"t"}}))
		}},
		{"ListVhosts", func() error { return ok(rh.ListVhosts()) }},
		{"GetVhost", func() error { return ok(rh.GetVhost(other)) }},
		{"PutVhostLimits", func() error {
			return ok(rh.PutVhostLimits(other, rabbithole.VhostLimitsValues{"max-queues": 100, "max-connections": 10}))
		}},
		{"GetVhostLimits", func() error { return ok(rh.GetVhostLimits(other)) }},
		{"GetAllVhostLimits", func() error { return ok(rh.GetAllVhostLimits()) }},
		{"DeleteVhostLimits", func() error { return ok(rh.DeleteVhostLimits(other, rabbithole.VhostLimits{"max-queues"})) }},

		{"PutUser", func() error {
			return ok(rh.PutUser(user, rabbithole.UserSettings{Password: "pw", Tags: rabbithole.UserTags{"management"}}))
		}},
		{"PutUserWithoutPassword", func() error {
			return ok(rh.PutUserWithoutPassword(user, rabbithole.UserSettings{Tags: rabbithole.UserTags{"management"}}))
		}},
		{"ListUsers", func() error { return ok(rh.ListUsers()) }},
		{"GetUser", func() error { return ok(rh.GetUser(user)) }},
		{"PutUserLimits", func() error { return ok(rh.PutUserLimits(user, rabbithole.UserLimitsValues{"max-connections": 5})) }},
		{"GetUserLimits", func() error { return ok(rh.GetUserLimits(user)) }},
		{"GetAllUserLimits", func() error { return ok(rh.GetAllUserLimits()) }},
		{"DeleteUserLimits", func() error { return ok(rh.DeleteUserLimits(user, rabbithole.UserLimits{"max-connections"})) }},
		{"UpdatePermissionsIn", func() error {
			return ok(rh.UpdatePermissionsIn(other, user, rabbithole.Permissions{Configure: ".*", Write: ".*", Read: ".*"}))
		}},
		{"ListPermissions", func() error { return ok(rh.ListPermissions()) }},
		{"ListPermissionsOf", func() error { return ok(rh.ListPermissionsOf(user)) }},
		{"GetPermissionsIn", func() error { return ok(rh.GetPermissionsIn(other, user)) }},
		{"UpdateTopicPermissionsIn", func() error {
			return ok(rh.UpdateTopicPermissionsIn(other, user, rabbithole.TopicPermissions{Exchange: "amq.topic", Write: "^a", Read: ".*"}))
		}},
		{"ListTopicPermissions", func() error { return ok(rh.ListTopicPermissions()) }},
		{"ListTopicPermissionsOf", func() error { return ok(rh.ListTopicPermissionsOf(user)) }},
		{"GetTopicPermissionsIn", func() error { return ok(rh.GetTopicPermissionsIn(other, user)) }},
		{"DeleteTopicPermissionsIn", func() error { return ok(rh.DeleteTopicPermissionsIn(other, user, "amq.topic")) }},
		{"ClearTopicPermissionsIn", func() error { return ok(rh.ClearTopicPermissionsIn(other, user)) }},
		{"ClearPermissionsIn", func() error { return ok(rh.ClearPermissionsIn(other, user)) }},

		{"DeclareExchange", func() error {
			return ok(rh.DeclareExchange(vh, "rh-x", rabbithole.ExchangeSettings{Type: "topic", Durable: true}))
		}},
		{"ListExchanges", func() error { return ok(rh.ListExchanges()) }},
		{"ListExchangesIn", func() error { return ok(rh.ListExchangesIn(vh)) }},
		{"GetExchange", func() error { return ok(rh.GetExchange(vh, "rh-x")) }},
		{"DeclareQueue", func() error { return ok(rh.DeclareQueue(vh, "rh-q", rabbithole.QueueSettings{Durable: true})) }},
		{"DeclareQueue quorum", func() error {
			return ok(rh.DeclareQueue(vh, "rh-qq", rabbithole.QueueSettings{Type: "quorum", Durable: true}))
		}},
		{"ListQueues", func() error { return ok(rh.ListQueues()) }},
		{"ListQueuesIn", func() error { return ok(rh.ListQueuesIn(vh)) }},
		{"ListQueuesWithParameters", func() error { return ok(rh.ListQueuesWithParameters(neturl.Values{"columns": {"name,messages"}})) }},
		{"ListQueuesWithParametersIn", func() error { return ok(rh.ListQueuesWithParametersIn(vh, neturl.Values{"name": {"rh"}})) }},
		{"PagedListQueuesWithParameters", func() error {
			return ok(rh.PagedListQueuesWithParameters(neturl.Values{"page": {"1"}, "page_size": {"10"}}))
		}},
		{"PagedListQueuesWithParametersIn", func() error {
			return ok(rh.PagedListQueuesWithParametersIn(vh, neturl.Values{"page": {"1"}, "page_size": {"10"}}))
		}},
		{"GetQueue", func() error { return ok(rh.GetQueue(vh, "rh-q")) }},
		{"GetQueueWithParameters", func() error { return ok(rh.GetQueueWithParameters(vh, "rh-q", neturl.Values{"lengths_age": {"60"}})) }},
		{"DeclareBinding", func() error {
			return ok(rh.DeclareBinding(vh, rabbithole.BindingInfo{Source: "rh-x", Vhost: vh, Destination: "rh-q",
				DestinationType: "queue", RoutingKey: "a.*"}))
		}},
		{"DeclareBinding to an exchange", func() error {
			return ok(rh.DeclareBinding(vh, rabbithole.BindingInfo{Source: "amq.topic", Vhost: vh, Destination: "rh-x",
				DestinationType: "exchange", RoutingKey: "#"}))
		}},
		{"ListBindings", func() error { return ok(rh.ListBindings()) }},
		{"ListBindingsIn", func() error { return ok(rh.ListBindingsIn(vh)) }},
		{"ListQueueBindings", func() error { return ok(rh.ListQueueBindings(vh, "rh-q")) }},
		{"ListQueueBindingsBetween", func() error { return ok(rh.ListQueueBindingsBetween(vh, "rh-x", "rh-q")) }},
		{"ListExchangeBindings", func() error { return ok(rh.ListExchangeBindings(vh, "rh-x", rabbithole.BindingSource)) }},
		{"ListExchangeBindingsWithSource", func() error { return ok(rh.ListExchangeBindingsWithSource(vh, "rh-x")) }},
		{"ListExchangeBindingsWithDestination", func() error { return ok(rh.ListExchangeBindingsWithDestination(vh, "rh-x")) }},
		{"ListExchangeBindingsBetween", func() error { return ok(rh.ListExchangeBindingsBetween(vh, "amq.topic", "rh-x")) }},
		{"DeleteBinding", func() error {
			return ok(rh.DeleteBinding(vh, rabbithole.BindingInfo{Source: "rh-x", Vhost: vh, Destination: "rh-q",
				DestinationType: "queue", RoutingKey: "a.*", PropertiesKey: "a.*"}))
		}},
		{"PurgeQueue", func() error { return ok(rh.PurgeQueue(vh, "rh-q")) }},
		{"SyncQueue", func() error { return ok(rh.SyncQueue(vh, "rh-q")) }},
		{"CancelSyncQueue", func() error { return ok(rh.CancelSyncQueue(vh, "rh-q")) }},

		{"PutPolicy", func() error {
			return ok(rh.PutPolicy(vh, "rh-p", rabbithole.Policy{Pattern: "^rh-", ApplyTo: "queues",
				Definition: rabbithole.PolicyDefinition{"max-length": 100}}))
		}},
		{"ListPolicies", func() error { return ok(rh.ListPolicies()) }},
		{"ListPoliciesIn", func() error { return ok(rh.ListPoliciesIn(vh)) }},
		{"GetPolicy", func() error { return ok(rh.GetPolicy(vh, "rh-p")) }},
		{"PutOperatorPolicy", func() error {
			return ok(rh.PutOperatorPolicy(vh, "rh-op", rabbithole.OperatorPolicy{Pattern: "^rh-", ApplyTo: "queues",
				Definition: rabbithole.PolicyDefinition{"max-length": 50}}))
		}},
		{"ListOperatorPolicies", func() error { return ok(rh.ListOperatorPolicies()) }},
		{"ListOperatorPoliciesIn", func() error { return ok(rh.ListOperatorPoliciesIn(vh)) }},
		{"GetOperatorPolicy", func() error { return ok(rh.GetOperatorPolicy(vh, "rh-op")) }},
		{"DeleteOperatorPolicy", func() error { return ok(rh.DeleteOperatorPolicy(vh, "rh-op")) }},
		{"DeletePolicy", func() error { return ok(rh.DeletePolicy(vh, "rh-p")) }},

		{"PutGlobalParameter", func() error { return ok(rh.PutGlobalParameter("rh-param", map[string]any{"a": 1})) }},
		{"ListGlobalParameters", func() error { return ok(rh.ListGlobalParameters()) }},
		{"GetGlobalParameter", func() error { return ok(rh.GetGlobalParameter("rh-param")) }},
		{"DeleteGlobalParameter", func() error { return ok(rh.DeleteGlobalParameter("rh-param")) }},
		{"PutRuntimeParameter", func() error {
			return ok(rh.PutRuntimeParameter("vhost-limits", other, "limits", map[string]any{"max-queues": 7}))
		}},
		{"ListRuntimeParameters", func() error { return ok(rh.ListRuntimeParameters()) }},
		{"ListRuntimeParametersFor", func() error { return ok(rh.ListRuntimeParametersFor("vhost-limits")) }},
		{"ListRuntimeParametersIn", func() error { return ok(rh.ListRuntimeParametersIn("vhost-limits", other)) }},
		{"GetRuntimeParameter", func() error { return ok(rh.GetRuntimeParameter("vhost-limits", other, "limits")) }},
		{"DeleteRuntimeParameter", func() error { return ok(rh.DeleteRuntimeParameter("vhost-limits", other, "limits")) }},

		{"HealthCheckAlarms", func() error { return ok(rh.HealthCheckAlarms()) }},
		{"HealthCheckLocalAlarms", func() error { return ok(rh.HealthCheckLocalAlarms()) }},
		{"HealthCheckCertificateExpiration", func() error { return ok(rh.HealthCheckCertificateExpiration(1, rabbithole.DAYS)) }},
		{"HealthCheckPortListener", func() error {
			ports, err := rh.ProtocolPorts()
			if err != nil {
				return err
			}
			p, found := ports["amqp"]
			if !found {
				return fmt.Errorf("no amqp listener in %v", ports)
			}
			return ok(rh.HealthCheckPortListener(uint(p)))
		}},
		{"HealthCheckProtocolListener", func() error { return ok(rh.HealthCheckProtocolListener(rabbithole.AMQP)) }},
		{"HealthCheckVirtualHosts", func() error { return ok(rh.HealthCheckVirtualHosts()) }},
		{"HealthCheckNodeIsQuorumCritical", func() error { return ok(rh.HealthCheckNodeIsQuorumCritical()) }},
		{"HealthCheckNodeIsMirrorSyncCritical", func() error { return ok(rh.HealthCheckNodeIsMirrorSyncCritical()) }},

		{"ListDefinitions", func() error { return ok(rh.ListDefinitions()) }},
		{"ListVhostDefinitions", func() error { return ok(rh.ListVhostDefinitions(vh)) }},
		{"UploadDefinitions", func() error {
			// The sections rabbit-hole writes as null when nil are given
			// (RabbitMQ 3.10.8 answers 500 to a null), and no permissions:
			// rabbit-hole's ExportedDefinitions drops their user and vhost.
			return ok(rh.UploadDefinitions(&rabbithole.ExportedDefinitions{
				Policies: &[]rabbithole.PolicyDefinition{}, Exchanges: &[]rabbithole.ExchangeInfo{}, Bindings: &[]rabbithole.BindingInfo{},
				Queues: &[]rabbithole.QueueInfo{{Name: "rh-imported", Vhost: vh, Durable: true, Arguments: map[string]any{}}}}))
		}},

		{"DeleteQueue", func() error { return ok(rh.DeleteQueue(vh, "rh-q")) }},
		{"DeleteQueue quorum", func() error { return ok(rh.DeleteQueue(vh, "rh-qq")) }},
		{"DeleteExchange", func() error { return ok(rh.DeleteExchange(vh, "rh-x")) }},
		{"CloseConnection", func() error { return ok(rh.CloseConnection(connName)) }},
		{"DeleteUser", func() error { return ok(rh.DeleteUser(user)) }},
		{"DeleteVhost", func() error { return ok(rh.DeleteVhost(other)) }},
	}
	// The shovel plugin's calls, where the broker has it (a reference
	// without rabbitmq_shovel_management answers 404 to /api/shovels).
	if r := m.call("GET", "/api/shovels", ""); r.status == 200 {
		local := "amqp:///" + esc(vh)
		shovels := []struct {
			name string
			call func() error
		}{
			{"DeclareShovel", func() error {
				return ok(rh.DeclareShovel(vh, "rh-shovel", rabbithole.ShovelDefinition{SourceURI: rabbithole.URISet{local}, SourceQueue: "rh-shovelled",
					DestinationURI: rabbithole.URISet{local}, DestinationQueue: "rh-shovelled-to", AckMode: "on-confirm", SourceDeleteAfter: "never"}))
			}},
			{"ListShovels", func() error { return ok(rh.ListShovels()) }},
			{"ListShovelsIn", func() error { return ok(rh.ListShovelsIn(vh)) }},
			{"GetShovel", func() error {
				s, err := rh.GetShovel(vh, "rh-shovel")
				if err == nil && s.Definition.SourceQueue != "rh-shovelled" {
					err = fmt.Errorf("read back %+v", s.Definition)
				}
				return err
			}},
			{"ListShovelStatus", func() error {
				var st []rabbithole.ShovelStatus
				waitFor(t, "the shovel running", func() bool {
					var err error
					st, err = rh.ListShovelStatus(vh)
					return err == nil && len(st) == 1 && st[0].State == "running"
				})
				return nil
			}},
			{"DeleteShovel", func() error { return ok(rh.DeleteShovel(vh, "rh-shovel")) }},
		}
		calls = append(calls[:len(calls)-1], append(shovels, calls[len(calls)-1])...)
	}
	// The federation plugin's calls, where the broker has it (a reference
	// without rabbitmq_federation_management answers 404 to
	// /api/federation-links). The upstream is not reached: no policy
	// federates anything from it.
	if r := m.call("GET", "/api/federation-links", ""); r.status == 200 {
		def := rabbithole.FederationDefinition{Uri: rabbithole.URISet{"amqp://rh-upstream.invalid"}, Exchange: "rh-upstream-x",
			Expires: 3600000, MessageTTL: 60000, MaxHops: 2, PrefetchCount: 100, ReconnectDelay: 5, AckMode: "on-publish", TrustUserId: true}
		listed := func(ups []rabbithole.FederationUpstream, err error) error {
			if err == nil && !slices.ContainsFunc(ups, func(u rabbithole.FederationUpstream) bool {
				return u.Name == "rh-upstream" && u.Vhost == vh && u.Component == rabbithole.FederationUpstreamComponent
			}) {
				err = fmt.Errorf("rh-upstream not in %+v", ups)
			}
			return err
		}
		federation := []struct {
			name string
			call func() error
		}{
			{"PutFederationUpstream", func() error { return ok(rh.PutFederationUpstream(vh, "rh-upstream", def)) }},
			{"GetFederationUpstream", func() error {
				up, err := rh.GetFederationUpstream(vh, "rh-upstream")
				if err == nil && !reflect.DeepEqual(up.Definition, def) {
					err = fmt.Errorf("read back %+v, want %+v", up.Definition, def)
				}
				return err
			}},
			{"ListFederationUpstreams", func() error { return listed(rh.ListFederationUpstreams()) }},
			{"ListFederationUpstreamsIn", func() error { return listed(rh.ListFederationUpstreamsIn(vh)) }},
			{"ListFederationLinks", func() error { return ok(rh.ListFederationLinks()) }},
			{"ListFederationLinksIn", func() error { return ok(rh.ListFederationLinksIn(vh)) }},
			{"DeleteFederationUpstream", func() error {
				if _, err := rh.DeleteFederationUpstream(vh, "rh-upstream"); err != nil {
					return err
				}
				// rabbit-hole takes a DELETE's 404 for success: look.
				if _, err := rh.GetFederationUpstream(vh, "rh-upstream"); err == nil {
					return fmt.Errorf("rh-upstream still there")
				}
				return nil
			}},
		}
		calls = append(calls[:len(calls)-1], append(federation, calls[len(calls)-1])...)
	}
	var failed []string
	for _, c := range calls {
		if err := c.call(); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", c.name, err))
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d rabbit-hole calls failed:\n%s", len(failed), len(calls), strings.Join(failed, "\n"))
	}
	t.Logf("%d of %d rabbit-hole calls answered", len(calls)-len(failed), len(calls))
}
