// Package amqpclient is what the broker needs to be a client of AMQP
// 0-9-1 brokers, itself included, for its shovels and federation links:
// URIs in RabbitMQ's form (ParseURI; one with no host is this broker),
// connecting to one of several (Connect), and field tables as
// amqp091-go takes them (Table).
//
// A URI with no host is reached through a socket pair that this broker
// serves (Dialer.Local, conn.Server.DialLocal) rather than its listener:
// without credentials the connection acts as the broker itself, with
// every right in its vhost, as RabbitMQ's direct connections do; so
// whoever sets a definition naming such a URI must be allowed that vhost
// (the callers check it).
package amqpclient
