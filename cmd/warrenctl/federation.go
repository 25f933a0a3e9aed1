package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
)

// federationColumns are the keys rabbitmqctl federation_status gives each
// link, the link's id first (restart_federation_link takes it) and the
// node that runs it last: Warren lists every node's links, where
// rabbitmqctl lists one node's.
var federationColumns = []string{"id", "type", "vhost", "exchange", "upstream_exchange", "queue", "upstream_queue",
	"upstream", "uri", "status", "local_connection", "error", "last_changed", "node"}

// federationStatus lists the links, as rabbitmqctl federation_status
// does; with --only-down those neither running nor starting. The rows
// keep the API's order (by vhost, then what each link federates).
func federationStatus(c *client, o *opts, out io.Writer, _ []string) error {
	path, banner := "/api/federation-links", "Listing federation links ..."
	if o.onlyDown {
		path, banner = "/api/federation-links/state/down", "Listing federation links which are down ..."
	}
	l := listing{path: func(*opts) string { return path }, fields: map[string]string{"last_changed": "timestamp"}}
	rows, err := l.rows(c, o, federationColumns)
	if err != nil {
		return err
	}
	return output(out, o, banner, federationColumns, rows)
}

// restartFederationLink restarts the link with that id, as rabbitmqctl
// restart_federation_link does. The API's restart route names the link's
// vhost and node too, so they are read from the links' listing; a link
// listed on several nodes is restarted on each.
func restartFederationLink(c *client, o *opts, out io.Writer, args []string) error {
	id := args[0]
	var links []struct {
		ID    string `json:"id"`
		VHost string `json:"vhost"`
		Node  string `json:"node"`
	}
	if err := c.get("/api/federation-links", &links); err != nil {
		return err
	}
	found := false
	for _, l := range links {
		if l.ID != id {
			continue
		}
		found = true
		if !o.quiet && !o.silent {
			fmt.Fprintf(out, "Restarting federation link %s on node %s\n", id, l.Node)
		}
		path := "/api/federation-links/vhost/" + url.PathEscape(l.VHost) + "/" + url.PathEscape(id) + "/" + url.PathEscape(l.Node) + "/restart"
		if err := c.do("DELETE", path, nil); err != nil {
			return err
		}
	}
	if !found {
		return errors.New("Link with the given ID was not found") // rabbitmqctl's words
	}
	return nil
}
