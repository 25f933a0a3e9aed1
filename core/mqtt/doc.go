// Package mqtt serves MQTT 3.1, 3.1.1 and 5.0 (protocol/mqtt is the
// codec) over the broker's vhosts, as RabbitMQ's rabbitmq_mqtt plugin
// maps MQTT onto AMQP 0-9-1's model: MQTT is one more front end beside
// core/conn and core/streamproto, and MQTT and AMQP clients meet in the
// same exchange and queues.
//
// # The mapping
//
//   - A client's user name may name its vhost: "vhost:user" (up to the
//     first colon); otherwise it is mqtt.vhost. A client without a user
//     name logs in as defaults.user when mqtt.allow_anonymous is on (the
//     default, as RabbitMQ's; that user's loopback-only rule still
//     applies, so out of the box anonymous clients are taken from this
//     host only). The user must be able to use the vhost.
//   - A topic is a routing key of mqtt.exchange (amq.topic): levels are
//     words ('/' becomes '.', a '.' inside a level '/'), and in filters
//     '+' becomes '*' and '#' stays '#' (TopicToKey, KeyToTopic).
//   - PUBLISH is a message to that exchange: QoS 1 persistent, QoS 0
//     not, with RabbitMQ's x-mqtt-publish-qos and x-mqtt-dup headers.
//     PUBACK goes once the message's queues took it, as an AMQP confirm:
//     after the store synced it when a durable queue stored it, after
//     the other nodes answered when it was forwarded, and in the order
//     of the PUBLISHes. Publishing needs write on the exchange and the
//     topic permission's write on the routing key.
//   - A session's subscriptions are bindings to two queues,
//     mqtt-subscription-<client id>qos0 and ...qos1 (SubscriptionQueue),
//     by the QoS granted; the connection consumes both. A persistent
//     session's (3.1.1 without clean session, 5.0 with a Session Expiry
//     Interval) outlive the connection: the QoS 1 queue is durable, both
//     expire (x-expires) once unused for mqtt.subscription_ttl, or the
//     5.0 session expiry when shorter; a transient session's are
//     exclusive to the connection. A resumed session's subscriptions are
//     read back from those bindings, and its queues deliver what they
//     kept. Subscribing needs configure, write and read on the queue,
//     read on the exchange and the topic permission's read on the key;
//     a refusal is that filter's failure in SUBACK.
//   - Deliveries are PUBLISHes of QoS min(subscription, message): a
//     message's own QoS is its x-mqtt-publish-qos header, and 1 for a
//     message published over AMQP without one. QoS 1 deliveries in
//     flight are bounded by mqtt.prefetch (and a 5.0 client's Receive
//     Maximum) and acked on the queue by PUBACK; those not acknowledged
//     when the connection ends go back to their queue, to be delivered
//     again with DUP. A QoS 0 delivery from the QoS 1 queue is acked
//     once written.
//   - QoS 2: SUBSCRIBE is granted QoS 1. A 3.1.1 PUBLISH of QoS 2 is
//     taken as QoS 1 and answered with PUBACK, as RabbitMQ 3.10 does
//     ("QoS2 publish (downgraded to QoS1)"); an MQTT 5 client is told
//     Maximum QoS 1 in CONNACK, and a QoS 2 PUBLISH ends its connection
//     with QoS not supported, as the specification says.
//   - A second CONNECT with a client id connected in the same vhost
//     takes the session over: the first connection is closed (told
//     Session taken over in 5.0), its will published, its deliveries
//     requeued, and the new one proceeds once it is gone.
//   - The will is published when the connection ends without a
//     DISCONNECT (or with 5.0's Disconnect with Will Message): a read
//     error, a keep-alive of 1.5 periods without a packet, a protocol
//     error, a takeover; not when the broker shuts down.
//   - MQTT 5 properties cross to AMQP as RabbitMQ 3.13 maps them:
//     Content Type as content_type, Correlation Data as correlation_id
//     (header x-correlation-id when it is not a short string), Response
//     Topic as header x-reply-to-topic (a routing key), User Properties
//     as string headers (a repeated name keeps its last value), Message
//     Expiry Interval as expiration; and back to MQTT 5 subscribers,
//     with the other string headers as User Properties.
//   - A PUBLISH or will with RETAIN is also kept for its topic in the
//     vhost (an empty one deletes what its topic kept), in the broker's
//     store, node by node as RabbitMQ keeps them (retain.go); a new
//     subscription is sent, after SUBACK, the retained messages its
//     filter matches, wildcards included (as mosquitto; RabbitMQ 3.10
//     matches exact filters only), with RETAIN set, at QoS min(granted,
//     message), unless 5.0's Retain Handling says not to. A retained
//     QoS 1 message waits for its PUBACK with the deliveries, outside
//     the prefetch.
//
// # Invariants
//
//   - One goroutine reads a connection and handles its packets; one
//     writes it (outbound). Deliveries are added to the outbound under
//     the queue's lock (consumer.Deliver takes Conn.deliverMu, then
//     outbound.mu, both leaves below the queue's lock in LOCKS.md); no
//     queue is called under either: acks, requeues and kicks are made
//     after unlocking, by the reader or the writer.
//   - At most outboundLimit bytes wait to be written before deliveries
//     stop; the writer kicks the queues it turned away once it wrote.
//   - A PUBACK is sent only once its message is in every queue it
//     routed to (and on disk for a stored one); PUBACKs keep the order
//     of their PUBLISHes.
//   - A session has one connection at a time, per vhost and client id.
//
// # Not done yet (refused or ignored as the specification allows)
//
//   - QoS 2 (above); PUBREC/PUBCOMP from a client end its connection, a
//     PUBREL is answered with PUBCOMP (Packet Identifier not found).
//   - MQTT 5: Topic Alias (Topic Alias Maximum 0: an alias ends the
//     connection), shared subscriptions (SUBACK 0x9E), Subscription
//     Identifiers (announced unavailable), No Local and Retain As
//     Published (ignored), Will Delay Interval (the will goes
//     at once), a Session Expiry Interval changed by DISCONNECT
//     (ignored), enhanced authentication (CONNACK Bad authentication
//     method), Request Response/Problem Information (ignored; reason
//     strings are not sent), Payload Format Indicator (not carried).
//   - MQTT over WebSocket and TLS, a port-to-vhost mapping, client
//     certificates as credentials, resource alarms holding publishers
//     (AMQP's connection.blocked), and clustering's cluster-wide client
//     id takeover (takeover is per node).
package mqtt
