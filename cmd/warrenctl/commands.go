package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// command is one verb: its usage line, how many arguments it takes (max
// -1: any number) and what it does.
type command struct {
	form     string
	min, max int
	run      func(c *client, o *opts, out io.Writer, args []string) error
}

func vhostPath(o *opts) string { return url.PathEscape(o.vhost) }

// listings are the list_* verbs, with rabbitmqctl's column names.
var listings = map[string]listing{
	"list_queues": {
		what: "queues", perVHost: true,
		path:     func(o *opts) string { return "/api/queues/" + vhostPath(o) },
		defaults: []string{"name", "messages"},
		columns: []string{"name", "durable", "auto_delete", "exclusive", "arguments", "policy", "messages",
			"messages_ready", "messages_unacknowledged", "message_bytes", "message_bytes_ready",
			"message_bytes_unacknowledged", "consumers", "consumer_utilisation", "memory", "state", "type",
			"head_message_timestamp", "exclusive_consumer_tag", "leader", "members", "online"},
	},
	"list_exchanges": {
		what: "exchanges", perVHost: true,
		path:     func(o *opts) string { return "/api/exchanges/" + vhostPath(o) },
		defaults: []string{"name", "type"},
		columns:  []string{"name", "type", "durable", "auto_delete", "internal", "arguments", "policy", "messages_delayed"},
	},
	"list_bindings": {
		what: "bindings", perVHost: true,
		path:     func(o *opts) string { return "/api/bindings/" + vhostPath(o) },
		defaults: []string{"source_name", "source_kind", "destination_name", "destination_kind", "routing_key", "arguments"},
		columns:  []string{"source_name", "source_kind", "destination_name", "destination_kind", "routing_key", "arguments"},
		fields: map[string]string{"source_name": "source", "source_kind": "source_kind",
			"destination_name": "destination", "destination_kind": "destination_type"},
	},
	"list_connections": {
		what:     "connections",
		path:     func(*opts) string { return "/api/connections" },
		defaults: []string{"user", "peer_host", "peer_port", "state"},
		columns: []string{"name", "user", "vhost", "peer_host", "peer_port", "host", "port", "state", "channels",
			"protocol", "auth_mechanism", "ssl", "timeout", "frame_max", "channel_max", "client_properties",
			"connected_at", "recv_oct", "send_oct", "recv_cnt", "send_cnt"},
	},
	"list_channels": {
		what:     "channels",
		path:     func(*opts) string { return "/api/channels" },
		defaults: []string{"name", "user", "consumer_count", "messages_unacknowledged"},
		columns: []string{"name", "connection", "number", "user", "vhost", "transactional", "confirm",
			"consumer_count", "messages_unacknowledged", "prefetch_count", "global_prefetch_count", "state"},
		fields: map[string]string{"connection": "connection_details.name"},
	},
	"list_consumers": {
		what: "consumers", perVHost: true,
		path:     func(o *opts) string { return "/api/consumers/" + vhostPath(o) },
		defaults: []string{"queue_name", "channel_pid", "consumer_tag", "ack_required", "prefetch_count", "active", "arguments"},
		columns:  []string{"queue_name", "channel_pid", "consumer_tag", "ack_required", "prefetch_count", "active", "exclusive", "arguments"},
		fields:   map[string]string{"queue_name": "queue.name", "channel_pid": "channel_details.name"},
	},
	// The stream plugin's, as rabbitmq-streams names their columns (its
	// INFO_ITEMS, CONSUMER_INFO_ITEMS and PUBLISHER_INFO_ITEMS). A
	// connection's pid is its name here. Warren has no TLS details to
	// show: the ssl_* and peer_cert_* columns are empty.
	"list_stream_connections": {
		what:     "stream connections",
		path:     func(*opts) string { return "/api/stream/connections" },
		defaults: []string{"conn_name"},
		columns: []string{"auth_mechanism", "client_properties", "conn_name", "connected_at", "connection_state", "frame_max",
			"heartbeat", "host", "peer_cert_issuer", "peer_cert_subject", "peer_cert_validity", "peer_host", "peer_port", "port",
			"ssl", "ssl_cipher", "ssl_hash", "ssl_key_exchange", "ssl_protocol", "subscriptions", "user", "vhost"},
		fields:  map[string]string{"conn_name": "name", "connection_state": "state", "heartbeat": "timeout"},
		augment: countSubscriptions,
	},
	// The MQTT plugin's, as rabbitmqctl list_mqtt_connections names its
	// columns: the MQTT connections among /api/connections.
	"list_mqtt_connections": {
		what:     "MQTT connections",
		path:     func(*opts) string { return "/api/connections" },
		keep:     func(r map[string]any) bool { p, _ := r["protocol"].(string); return strings.HasPrefix(p, "MQTT") },
		defaults: []string{"client_id", "conn_name"},
		columns: []string{"client_id", "conn_name", "connection_state", "host", "port", "peer_host", "peer_port",
			"protocol", "user", "vhost", "keepalive", "subscriptions", "messages_unacknowledged"},
		fields: map[string]string{"client_id": "client_properties.client_id", "conn_name": "name",
			"connection_state": "state", "keepalive": "timeout", "subscriptions": "mqtt_subscriptions"},
	},
	"list_stream_consumers": {
		what: "stream consumers", perVHost: true,
		path: func(o *opts) string { return "/api/stream/consumers/" + vhostPath(o) },
		defaults: []string{"connection_pid", "subscription_id", "stream", "messages_consumed", "offset", "offset_lag",
			"credits", "properties"},
		columns: []string{"connection_pid", "subscription_id", "stream", "messages_consumed", "offset", "offset_lag",
			"credits", "properties", "active", "activity_status"},
		fields: map[string]string{"connection_pid": "connection_details.name", "stream": "queue.name", "messages_consumed": "consumed"},
	},
	"list_stream_publishers": {
		what: "stream publishers", perVHost: true,
		path: func(o *opts) string { return "/api/stream/publishers/" + vhostPath(o) },
		defaults: []string{"connection_pid", "publisher_id", "stream", "reference", "messages_published",
			"messages_confirmed", "messages_errored"},
		columns: []string{"connection_pid", "publisher_id", "stream", "reference", "messages_published",
			"messages_confirmed", "messages_errored"},
		fields: map[string]string{"connection_pid": "connection_details.name", "stream": "queue.name",
			"messages_published": "published", "messages_confirmed": "confirmed", "messages_errored": "errored"},
	},
}

// countSubscriptions gives each stream connection its subscriptions, a
// column rabbitmq-streams has and the API's connection does not: the
// connection's consumers, counted.
func countSubscriptions(c *client, cols []string, conns []map[string]any) error {
	if !slices.Contains(cols, "subscriptions") {
		return nil
	}
	var consumers []struct {
		Conn struct {
			Name string `json:"name"`
		} `json:"connection_details"`
	}
	if err := c.get("/api/stream/consumers", &consumers); err != nil {
		return err
	}
	per := map[string]int{}
	for _, k := range consumers {
		per[k.Conn.Name]++
	}
	for _, conn := range conns {
		name, _ := conn["name"].(string)
		conn["subscriptions"] = per[name]
	}
	return nil
}

func list(c *client, o *opts, out io.Writer, l listing, args []string) error {
	cols, err := l.chosen(args)
	if err != nil {
		return err
	}
	rows, err := l.rows(c, o, cols)
	if err != nil {
		return err
	}
	if l.what == "bindings" {
		// Every binding's source is an exchange; the API has no field for it.
		for _, row := range rows {
			for j, col := range cols {
				if col == "source_kind" {
					row[j] = "exchange"
				}
			}
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return cell(rows[i][0]) < cell(rows[j][0]) })
	banner := "Listing " + l.what + " ..."
	if l.perVHost {
		banner = "Listing " + l.what + " for vhost " + o.vhost + " ..."
	}
	return output(out, o, banner, cols, rows)
}

// commands are every other verb.
var commands = map[string]command{
	"status":                       {form: "status", run: status},
	"ping":                         {form: "ping", run: ping},
	"await_startup":                {form: "await_startup [--timeout SECONDS]", run: awaitStartup},
	"version":                      {form: "version", run: version},
	"list_alarms":                  {form: "list_alarms", run: listAlarms},
	"check_running":                {form: "check_running", max: 0, run: checkRunning},
	"check_local_alarms":           {form: "check_local_alarms", max: 0, run: checkLocalAlarms},
	"check_alarms":                 {form: "check_alarms", max: 0, run: checkAlarms},
	"check_port_connectivity":      {form: "check_port_connectivity", max: 0, run: checkPortConnectivity},
	"check_virtual_hosts":          {form: "check_virtual_hosts", max: 0, run: checkVirtualHosts},
	"check_certificate_expiration": {form: "check_certificate_expiration", max: 0, run: checkCertificateExpiration},
	"listeners":                    {form: "listeners", max: 0, run: listListeners},
	"memory_breakdown":             {form: "memory_breakdown [--unit UNIT]", max: 0, run: memoryBreakdown},
	"cluster_status":               {form: "cluster_status", run: clusterStatus},
	"forget_cluster_node":          {form: "forget_cluster_node NODE", min: 1, max: 1, run: forgetClusterNode},
	"join_cluster":                 {form: "join_cluster ADDR", min: 1, max: 1, run: joinCluster},
	"set_vm_memory_high_watermark": {form: "set_vm_memory_high_watermark FRACTION | absolute BYTES", min: 1, max: 2,
		run: setMemoryWatermark},
	"set_disk_free_limit": {form: "set_disk_free_limit BYTES | mem_relative FRACTION", min: 1, max: 2,
		run: setDiskFreeLimit},

	"close_connection": {form: "close_connection NAME REASON", min: 2, max: 2,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			if args[0] == "" {
				return errors.New("close_connection: the connection's name is empty (list_connections name lists them)")
			}
			h := http.Header{"X-Reason": {args[1]}}
			return c.request("DELETE", "/api/connections/"+url.PathEscape(args[0]), nil, nil, h)
		}},
	"close_all_connections": {form: "close_all_connections [-p VHOST] REASON", min: 1, max: 1,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			var conns []struct {
				Name  string `json:"name"`
				VHost string `json:"vhost"`
			}
			if err := c.get("/api/connections", &conns); err != nil {
				return err
			}
			h := http.Header{"X-Reason": {args[0]}}
			for _, cn := range conns {
				if o.vhostSet && cn.VHost != o.vhost {
					continue
				}
				if err := c.request("DELETE", "/api/connections/"+url.PathEscape(cn.Name), nil, nil, h); err != nil {
					return err
				}
			}
			return nil
		}},
	"purge_queue": {form: "purge_queue [-p VHOST] NAME", min: 1, max: 1,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			return c.do("DELETE", "/api/queues/"+vhostPath(o)+"/"+url.PathEscape(args[0])+"/contents", nil)
		}},
	"delete_queue": {form: "delete_queue [-p VHOST] NAME [--if-empty] [--if-unused]", min: 1, max: 1,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			q := url.Values{}
			if o.ifEmpty {
				q.Set("if-empty", "true")
			}
			if o.ifUnused {
				q.Set("if-unused", "true")
			}
			path := "/api/queues/" + vhostPath(o) + "/" + url.PathEscape(args[0])
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			return c.do("DELETE", path, nil)
		}},
	"purge_delayed": {form: "purge_delayed [-p VHOST] EXCHANGE", min: 1, max: 1,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			var res struct {
				N int `json:"message_count"`
			}
			if err := c.request("DELETE", "/api/exchanges/"+vhostPath(o)+"/"+url.PathEscape(args[0])+"/delayed", nil, &res, nil); err != nil {
				return err
			}
			if !o.silent {
				fmt.Fprintf(out, "Purged %d delayed messages of exchange %s\n", res.N, args[0])
			}
			return nil
		}},
	"delete_exchange": {form: "delete_exchange [-p VHOST] NAME [--if-unused]", min: 1, max: 1,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			path := "/api/exchanges/" + vhostPath(o) + "/" + url.PathEscape(args[0])
			if o.ifUnused {
				path += "?if-unused=true"
			}
			return c.do("DELETE", path, nil)
		}},

	"list_vhosts": {form: "list_vhosts", run: table("/api/vhosts", "name")},
	"add_vhost": {form: "add_vhost NAME", min: 1, max: 1, run: func(c *client, o *opts, out io.Writer, args []string) error {
		return c.do("PUT", "/api/vhosts/"+url.PathEscape(args[0]), nil)
	}},
	"delete_vhost": {form: "delete_vhost NAME", min: 1, max: 1, run: func(c *client, o *opts, out io.Writer, args []string) error {
		return c.do("DELETE", "/api/vhosts/"+url.PathEscape(args[0]), nil)
	}},
	"list_users": {form: "list_users", run: table("/api/users", "name", "tags")},
	"add_user": {form: "add_user NAME PASSWORD", min: 2, max: 2, run: func(c *client, o *opts, out io.Writer, args []string) error {
		return c.do("PUT", "/api/users/"+url.PathEscape(args[0]), map[string]any{"password": args[1], "tags": []string{}})
	}},
	"set_user_tags": {form: "set_user_tags NAME [TAG...]", min: 1, max: -1, run: func(c *client, o *opts, out io.Writer, args []string) error {
		return c.do("PUT", "/api/users/"+url.PathEscape(args[0]), map[string]any{"tags": append([]string{}, args[1:]...)})
	}},
	"change_password": {form: "change_password NAME PASSWORD", min: 2, max: 2, run: func(c *client, o *opts, out io.Writer, args []string) error {
		var u struct {
			Tags []string `json:"tags"`
		}
		if err := c.get("/api/users/"+url.PathEscape(args[0]), &u); err != nil {
			return err
		}
		return c.do("PUT", "/api/users/"+url.PathEscape(args[0]), map[string]any{"password": args[1], "tags": append([]string{}, u.Tags...)})
	}},
	"authenticate_user": {form: "authenticate_user NAME PASSWORD", min: 2, max: 2, run: func(c *client, o *opts, out io.Writer, args []string) error {
		as := *c
		as.user, as.password = args[0], args[1]
		if err := as.get("/api/whoami", nil); err != nil {
			return fmt.Errorf("Error: failed to authenticate user %q: %v", args[0], err)
		}
		if !o.quiet && !o.silent {
			fmt.Fprintf(out, "Success\n")
		}
		return nil
	}},
	"list_user_permissions": {form: "list_user_permissions NAME", min: 1, max: 1,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			return table("/api/users/"+url.PathEscape(args[0])+"/permissions", "vhost", "configure", "write", "read")(c, o, out, args)
		}},
	"delete_user": {form: "delete_user NAME", min: 1, max: 1, run: func(c *client, o *opts, out io.Writer, args []string) error {
		return c.do("DELETE", "/api/users/"+url.PathEscape(args[0]), nil)
	}},
	"list_permissions": {form: "list_permissions", run: table("/api/permissions", "vhost", "user", "configure", "write", "read")},
	"set_permissions": {form: "set_permissions [-p VHOST] USER CONFIGURE WRITE READ", min: 4, max: 4,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			return c.do("PUT", "/api/permissions/"+vhostPath(o)+"/"+url.PathEscape(args[0]),
				map[string]string{"configure": args[1], "write": args[2], "read": args[3]})
		}},
	"clear_permissions": {form: "clear_permissions [-p VHOST] USER", min: 1, max: 1,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			return c.do("DELETE", "/api/permissions/"+vhostPath(o)+"/"+url.PathEscape(args[0]), nil)
		}},
	"list_topic_permissions": {form: "list_topic_permissions [-p VHOST]", run: func(c *client, o *opts, out io.Writer, args []string) error {
		return table("/api/vhosts/"+vhostPath(o)+"/topic-permissions", "user", "exchange", "write", "read")(c, o, out, args)
	}},
	"list_user_topic_permissions": {form: "list_user_topic_permissions USER", min: 1, max: 1,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			return table("/api/users/"+url.PathEscape(args[0])+"/topic-permissions", "vhost", "exchange", "write", "read")(c, o, out, args)
		}},
	"set_topic_permissions": {form: "set_topic_permissions [-p VHOST] USER EXCHANGE WRITE READ", min: 4, max: 4,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			return c.do("PUT", "/api/topic-permissions/"+vhostPath(o)+"/"+url.PathEscape(args[0]),
				map[string]string{"exchange": args[1], "write": args[2], "read": args[3]})
		}},
	"clear_topic_permissions": {form: "clear_topic_permissions [-p VHOST] USER [EXCHANGE]", min: 1, max: 2,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			path := "/api/topic-permissions/" + vhostPath(o) + "/" + url.PathEscape(args[0])
			if len(args) == 2 {
				path += "/" + url.PathEscape(args[1])
			}
			return c.do("DELETE", path, nil)
		}},
	"list_vhost_limits": {form: "list_vhost_limits [-p VHOST]", run: func(c *client, o *opts, out io.Writer, args []string) error {
		return table("/api/vhost-limits/"+vhostPath(o), "vhost", "value")(c, o, out, args)
	}},
	"set_vhost_limits": {form: "set_vhost_limits [-p VHOST] JSON", min: 1, max: 1, run: func(c *client, o *opts, out io.Writer, args []string) error {
		return setLimits(c, "/api/vhost-limits/"+vhostPath(o), args[0], true)
	}},
	"clear_vhost_limits": {form: "clear_vhost_limits [-p VHOST]", run: func(c *client, o *opts, out io.Writer, args []string) error {
		return setLimits(c, "/api/vhost-limits/"+vhostPath(o), "{}", true)
	}},
	"list_user_limits": {form: "list_user_limits [USER]", max: 1, run: func(c *client, o *opts, out io.Writer, args []string) error {
		path := "/api/user-limits"
		if len(args) == 1 {
			path += "/" + url.PathEscape(args[0])
		}
		return table(path, "user", "value")(c, o, out, args)
	}},
	"set_user_limits": {form: "set_user_limits USER JSON", min: 2, max: 2, run: func(c *client, o *opts, out io.Writer, args []string) error {
		return setLimits(c, "/api/user-limits/"+url.PathEscape(args[0]), args[1], false)
	}},
	"clear_user_limits": {form: "clear_user_limits USER NAME|all", min: 2, max: 2, run: func(c *client, o *opts, out io.Writer, args []string) error {
		base := "/api/user-limits/" + url.PathEscape(args[0])
		if args[1] != "all" {
			return c.do("DELETE", base+"/"+url.PathEscape(args[1]), nil)
		}
		return setLimits(c, base, "{}", true)
	}},
	"list_policies": {form: "list_policies [-p VHOST]", run: func(c *client, o *opts, out io.Writer, args []string) error {
		return table("/api/policies/"+vhostPath(o), "name", "pattern", "apply-to", "priority", "definition")(c, o, out, args)
	}},
	"set_policy": {form: "set_policy [-p VHOST] [--priority N] [--apply-to queues|exchanges|all] NAME PATTERN DEFINITION",
		min: 3, max: 3, run: setPolicy("policies")},
	"clear_policy": {form: "clear_policy [-p VHOST] NAME", min: 1, max: 1,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			return c.do("DELETE", "/api/policies/"+vhostPath(o)+"/"+url.PathEscape(args[0]), nil)
		}},
	"list_global_parameters": {form: "list_global_parameters", max: 0, run: table("/api/global-parameters", "name", "value")},
	"set_global_parameter": {form: "set_global_parameter NAME VALUE", min: 2, max: 2,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			var value any
			if err := json.Unmarshal([]byte(args[1]), &value); err != nil {
				return fmt.Errorf("value %q is not JSON: %v", args[1], err)
			}
			return c.do("PUT", "/api/global-parameters/"+url.PathEscape(args[0]), map[string]any{"value": value})
		}},
	"clear_global_parameter": {form: "clear_global_parameter NAME", min: 1, max: 1,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			return c.do("DELETE", "/api/global-parameters/"+url.PathEscape(args[0]), nil)
		}},
	"list_parameters": {form: "list_parameters [-p VHOST]", max: 0, run: listParameters},
	"set_parameter": {form: "set_parameter [-p VHOST] COMPONENT NAME VALUE", min: 3, max: 3,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			var value any
			if err := json.Unmarshal([]byte(args[2]), &value); err != nil {
				return fmt.Errorf("value %q is not JSON: %v", args[2], err)
			}
			return c.do("PUT", parameterPath(o, args[0], args[1]), map[string]any{"value": value})
		}},
	"clear_parameter": {form: "clear_parameter [-p VHOST] COMPONENT NAME", min: 2, max: 2,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			return c.do("DELETE", parameterPath(o, args[0], args[1]), nil)
		}},
	"shovel_status": {form: "shovel_status", max: 0,
		run: table("/api/shovels", "name", "vhost", "type", "state", "src_uri", "src_queue", "dest_uri", "dest_queue", "reason", "timestamp")},
	"delete_shovel": {form: "delete_shovel [-p VHOST] NAME", min: 1, max: 1,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			return c.do("DELETE", "/api/shovels/vhost/"+vhostPath(o)+"/"+url.PathEscape(args[0]), nil)
		}},
	"restart_shovel": {form: "restart_shovel [-p VHOST] NAME", min: 1, max: 1,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			return c.do("DELETE", "/api/shovels/vhost/"+vhostPath(o)+"/"+url.PathEscape(args[0])+"/restart", nil)
		}},
	"federation_status":       {form: "federation_status [--only-down]", max: 0, run: federationStatus},
	"restart_federation_link": {form: "restart_federation_link ID", min: 1, max: 1, run: restartFederationLink},
	"list_operator_policies": {form: "list_operator_policies [-p VHOST]", run: func(c *client, o *opts, out io.Writer, args []string) error {
		return table("/api/operator-policies/"+vhostPath(o), "name", "pattern", "apply-to", "priority", "definition")(c, o, out, args)
	}},
	"set_operator_policy": {form: "set_operator_policy [-p VHOST] [--priority N] [--apply-to queues|exchanges|all] NAME PATTERN DEFINITION",
		min: 3, max: 3, run: setPolicy("operator-policies")},
	"clear_operator_policy": {form: "clear_operator_policy [-p VHOST] NAME", min: 1, max: 1,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			return c.do("DELETE", "/api/operator-policies/"+vhostPath(o)+"/"+url.PathEscape(args[0]), nil)
		}},
	"plugins": {form: "plugins list | enable NAME | reload NAME | disable NAME [--force] | configure NAME KEY VALUE | reset NAME KEY", min: 1, max: 4, run: plugins},

	"quorum_status":                    {form: "quorum_status [-p VHOST] QUEUE", min: 1, max: 1, run: quorumStatus},
	"check_if_node_is_quorum_critical": {form: "check_if_node_is_quorum_critical", max: 0, run: checkQuorumCritical},
	"add_member": {form: "add_member [-p VHOST] QUEUE NODE", min: 2, max: 2,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			if !o.quiet && !o.silent {
				fmt.Fprintf(out, "Adding a replica for queue %s on node %s...\n", args[0], args[1])
			}
			return c.do("POST", "/api/warren/queues/"+vhostPath(o)+"/"+url.PathEscape(args[0])+"/members", map[string]string{"node": args[1]})
		}},
	"delete_member": {form: "delete_member [-p VHOST] QUEUE NODE", min: 2, max: 2,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			if !o.quiet && !o.silent {
				fmt.Fprintf(out, "Removing a replica of queue %s on node %s...\n", args[0], args[1])
			}
			return c.do("DELETE", "/api/warren/queues/"+vhostPath(o)+"/"+url.PathEscape(args[0])+"/members/"+url.PathEscape(args[1]), nil)
		}},
	"grow": {form: "grow NODE all|even [--vhost-pattern RE] [--queue-pattern RE]", min: 2, max: 2,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			body := map[string]string{"node": args[0], "strategy": args[1], "vhost_pattern": o.vhostPattern, "queue_pattern": o.queuePattern}
			return quorumChanges(c, o, out, "/api/warren/quorum/grow", body, "Growing quorum queues to "+args[0]+"...")
		}},
	"rebalance": {form: "rebalance all|quorum|stream|classic [--vhost-pattern RE] [--queue-pattern RE]", min: 1, max: 1,
		run: rebalance},
	"shrink": {form: "shrink NODE", min: 1, max: 1,
		run: func(c *client, o *opts, out io.Writer, args []string) error {
			return quorumChanges(c, o, out, "/api/warren/quorum/shrink", map[string]string{"node": args[0]},
				"Shrinking quorum queues on "+args[0]+"...")
		}},
}

func parameterPath(o *opts, component, name string) string {
	return "/api/parameters/" + url.PathEscape(component) + "/" + vhostPath(o) + "/" + url.PathEscape(name)
}

// listParameters lists a vhost's runtime parameters (its limits, and
// the registered components'), as rabbitmqctl list_parameters does.
func listParameters(c *client, o *opts, out io.Writer, _ []string) error {
	var params []map[string]any
	if err := c.get("/api/parameters", &params); err != nil {
		return err
	}
	cols := []string{"component", "name", "value"}
	var rows [][]any
	for _, p := range params {
		if p["vhost"] == o.vhost {
			rows = append(rows, []any{p["component"], p["name"], p["value"]})
		}
	}
	return output(out, o, "Listing runtime parameters for vhost "+o.vhost+" ...", cols, rows)
}

// rebalance moves the leaders of replicated queues so that each node
// leads its share, and prints each node's leaders afterwards, as
// rabbitmq-queues rebalance does (with Warren's streams as a column).
func rebalance(c *client, o *opts, out io.Writer, args []string) error {
	what := map[string]string{"all": "all queues", "quorum": "quorum queues", "stream": "streams", "classic": "classic queues"}[args[0]]
	if what == "" {
		return fmt.Errorf("rebalance: %q is not one of all, quorum, stream, classic", args[0])
	}
	var rows []struct {
		Node          string `json:"node"`
		QuorumQueues  int    `json:"quorum_queues"`
		Streams       int    `json:"streams"`
		ClassicQueues int    `json:"classic_queues"`
	}
	body := map[string]string{"type": args[0], "vhost_pattern": o.vhostPattern, "queue_pattern": o.queuePattern}
	if err := c.request("POST", "/api/warren/quorum/rebalance", body, &rows, nil); err != nil {
		return err
	}
	cells := make([][]any, len(rows))
	for i, r := range rows {
		cells[i] = []any{r.Node, r.QuorumQueues, r.Streams, r.ClassicQueues}
	}
	return output(out, o, "Re-balancing leaders of "+what+"...",
		[]string{"Node name", "Number of quorum queues", "Number of streams", "Number of replicated classic queues"}, cells)
}

// quorumChanges runs grow or shrink and prints a row per queue, as
// rabbitmq-queues does.
func quorumChanges(c *client, o *opts, out io.Writer, path string, body map[string]string, banner string) error {
	var rows []struct {
		VHost  string `json:"vhost"`
		Name   string `json:"name"`
		Size   int    `json:"size"`
		Result string `json:"result"`
	}
	if err := c.request("POST", path, body, &rows, nil); err != nil {
		return err
	}
	cells := make([][]any, len(rows))
	for i, r := range rows {
		cells[i] = []any{r.VHost, r.Name, r.Size, r.Result}
	}
	return output(out, o, banner, []string{"vhost", "name", "size", "result"}, cells)
}

// table lists an endpoint's rows with fixed columns.
func table(path string, cols ...string) func(*client, *opts, io.Writer, []string) error {
	return func(c *client, o *opts, out io.Writer, _ []string) error {
		l := listing{path: func(*opts) string { return path }, defaults: cols}
		rows, err := l.rows(c, o, cols)
		if err != nil {
			return err
		}
		sort.SliceStable(rows, func(i, j int) bool { return cell(rows[i][0]) < cell(rows[j][0]) })
		return output(out, o, "", cols, rows)
	}
}

// setLimits sets the limits of the JSON object at base (a vhost's or a
// user's, one PUT each); with replace, as rabbitmqctl's set_vhost_limits,
// the limits it leaves out are cleared (set_user_limits adds to them).
func setLimits(c *client, base, jsonLimits string, replace bool) error {
	var want map[string]json.Number
	dec := json.NewDecoder(strings.NewReader(jsonLimits))
	dec.UseNumber()
	if err := dec.Decode(&want); err != nil {
		return fmt.Errorf("%q is not a JSON object of numbers: %v", jsonLimits, err)
	}
	var now []struct {
		Value map[string]any `json:"value"`
	}
	if replace {
		if err := c.get(base, &now); err != nil {
			return err
		}
	}
	// Set first: a limit the broker refuses leaves the others as they were.
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if err := c.do("PUT", base+"/"+url.PathEscape(name), map[string]any{"value": want[name]}); err != nil {
			return err
		}
	}
	for _, l := range now {
		for name := range l.Value {
			if _, kept := want[name]; !kept {
				if err := c.do("DELETE", base+"/"+url.PathEscape(name), nil); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// setPolicy is set_policy, or set_operator_policy with kind
// "operator-policies" (the API's path for them).
func setPolicy(kind string) func(c *client, o *opts, out io.Writer, args []string) error {
	return func(c *client, o *opts, out io.Writer, args []string) error {
		var def map[string]any
		if err := json.Unmarshal([]byte(args[2]), &def); err != nil {
			return fmt.Errorf("definition %q is not a JSON object: %v", args[2], err)
		}
		return c.do("PUT", "/api/"+kind+"/"+vhostPath(o)+"/"+url.PathEscape(args[0]), map[string]any{
			"pattern": args[1], "definition": def, "priority": o.priority, "apply-to": o.applyTo,
		})
	}
}

func plugins(c *client, o *opts, out io.Writer, args []string) error {
	switch args[0] {
	case "list":
		return table("/api/plugins", "name", "enabled", "version", "abi", "features", "types", "state", "hash")(c, o, out, nil)
	case "enable", "disable", "reload":
		if len(args) != 2 {
			return fmt.Errorf("usage: warrenctl plugins %s NAME", args[0])
		}
		// reload is enable: an enabled plugin whose module changed is
		// upgraded live; the same module is left as it is.
		verb := args[0]
		if verb == "reload" {
			verb = "enable"
		}
		path := "/api/plugins/" + url.PathEscape(args[1]) + "/" + verb
		if o.force {
			path += "?force=true"
		}
		if err := c.do("POST", path, nil); err != nil {
			return err
		}
		fmt.Fprintf(out, "plugin %s %s\n", args[1], strings.TrimSuffix(args[0], "e")+"ed")
		return nil
	case "configure":
		if len(args) != 4 {
			return fmt.Errorf("usage: warrenctl plugins configure NAME KEY VALUE")
		}
		// The broker converts the text to the setting's kind.
		if err := c.do("PUT", pluginSettingPath(args[1], args[2]), map[string]any{"value": args[3]}); err != nil {
			return err
		}
		fmt.Fprintf(out, "plugin %s: %s set to %s\n", args[1], args[2], args[3])
		return nil
	case "reset":
		if len(args) != 3 {
			return fmt.Errorf("usage: warrenctl plugins reset NAME KEY")
		}
		if err := c.do("DELETE", pluginSettingPath(args[1], args[2]), nil); err != nil {
			return err
		}
		fmt.Fprintf(out, "plugin %s: %s reset to the configuration's\n", args[1], args[2])
		return nil
	}
	return fmt.Errorf("unknown plugins command %q", args[0])
}

func pluginSettingPath(name, key string) string {
	return "/api/plugins/" + url.PathEscape(name) + "/settings/" + url.PathEscape(key)
}

// node is the figures of /api/nodes that status and list_alarms show.
type node struct {
	Name          string  `json:"name"`
	Uptime        float64 `json:"uptime"` // ms
	MemUsed       float64 `json:"mem_used"`
	MemLimit      float64 `json:"mem_limit"`
	MemAlarm      bool    `json:"mem_alarm"`
	DiskFree      float64 `json:"disk_free"`
	DiskFreeLimit float64 `json:"disk_free_limit"`
	DiskFreeAlarm bool    `json:"disk_free_alarm"`
	FDUsed        float64 `json:"fd_used"`
	FDTotal       float64 `json:"fd_total"`
	// EnabledPlugins are named without versions: describing a plugin
	// that is not enabled means compiling it, which /api/plugins does.
	EnabledPlugins []string `json:"enabled_plugins"`
}

func thisNode(c *client) (node, error) {
	var nodes []node
	if err := c.get("/api/nodes", &nodes); err != nil {
		return node{}, err
	}
	if len(nodes) == 0 {
		return node{}, errors.New("the broker listed no node")
	}
	return nodes[0], nil
}

func status(c *client, o *opts, out io.Writer, _ []string) error {
	var ov struct {
		Version   string `json:"product_version"`
		Listeners []struct {
			Protocol string `json:"protocol"`
			IP       string `json:"ip_address"`
			Port     any    `json:"port"`
		} `json:"listeners"`
	}
	if err := c.get("/api/overview", &ov); err != nil {
		return err
	}
	n, err := thisNode(c)
	if err != nil {
		return err
	}
	enabled := n.EnabledPlugins
	var listeners []string
	for _, l := range ov.Listeners {
		listeners = append(listeners, fmt.Sprintf("%s %s:%v", l.Protocol, l.IP, l.Port))
	}
	if o.formatter == "json" {
		b, err := json.Marshal(map[string]any{
			"node": n.Name, "version": ov.Version, "uptime_seconds": int64(n.Uptime / 1000),
			"memory":           map[string]any{"used": n.MemUsed, "watermark": n.MemLimit, "alarm": n.MemAlarm},
			"disk":             map[string]any{"free": n.DiskFree, "limit": n.DiskFreeLimit, "alarm": n.DiskFreeAlarm},
			"file_descriptors": map[string]any{"used": n.FDUsed, "total": n.FDTotal},
			"listeners":        listeners, "alarms": alarms(n), "plugins": enabled,
		})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(b))
		return err
	}
	if !o.quiet && !o.silent {
		fmt.Fprintf(out, "Status of node %s ...\n", n.Name)
	}
	fmt.Fprintf(out, "Version: Warren %s\n", ov.Version)
	fmt.Fprintf(out, "Uptime: %s\n", (time.Duration(n.Uptime) * time.Millisecond).Round(time.Second))
	fmt.Fprintf(out, "Memory: %s used, watermark %s\n", bytesText(n.MemUsed), bytesText(n.MemLimit))
	fmt.Fprintf(out, "Disk: %s free, limit %s\n", bytesText(n.DiskFree), bytesText(n.DiskFreeLimit))
	fmt.Fprintf(out, "File descriptors: %.0f used of %.0f\n", n.FDUsed, n.FDTotal)
	fmt.Fprintf(out, "Listeners: %s\n", strings.Join(listeners, ", "))
	if a := alarms(n); len(a) > 0 {
		fmt.Fprintf(out, "Alarms: %s\n", strings.Join(a, ", "))
	} else {
		fmt.Fprintln(out, "Alarms: none")
	}
	if len(enabled) == 0 {
		enabled = []string{"none"}
	}
	fmt.Fprintf(out, "Plugins enabled: %s\n", strings.Join(enabled, ", "))
	return nil
}

func alarms(n node) []string {
	a := []string{}
	if n.MemAlarm {
		a = append(a, "memory")
	}
	if n.DiskFreeAlarm {
		a = append(a, "disk")
	}
	return a
}

func bytesText(b float64) string {
	if b == 0 {
		return "none"
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return strconv.FormatFloat(b, 'f', 1, 64) + " " + units[i]
}

func listAlarms(c *client, o *opts, out io.Writer, _ []string) error {
	n, err := thisNode(c)
	if err != nil {
		return err
	}
	a := alarms(n)
	if o.formatter == "json" {
		b, _ := json.Marshal(a)
		_, err := fmt.Fprintln(out, string(b))
		return err
	}
	if !o.quiet && !o.silent {
		fmt.Fprintf(out, "Listing alarms of node %s ...\n", n.Name)
	}
	for _, name := range a {
		fmt.Fprintln(out, name)
	}
	return nil
}

func ping(c *client, o *opts, out io.Writer, _ []string) error {
	var who map[string]any
	if err := c.get("/api/whoami", &who); err != nil {
		return err
	}
	fmt.Fprintln(out, "Ping succeeded")
	return nil
}

// awaitStartup polls until the admin API answers as Warren (or the
// timeout, 300 s by default as rabbitmqctl's, passes).
func awaitStartup(c *client, o *opts, out io.Writer, _ []string) error {
	timeout := o.timeout
	if timeout == 0 {
		timeout = 300 * time.Second
	}
	deadline := time.Now().Add(timeout)
	c.timeout = 5 * time.Second
	for {
		var who map[string]any
		err := c.get("/api/whoami", &who)
		if err == nil {
			return nil
		}
		if !strings.Contains(err.Error(), "cannot reach") {
			return err // it answered, and not as a running Warren would
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the broker did not start within %v: %v", timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func version(c *client, o *opts, out io.Writer, _ []string) error {
	var ov struct {
		Version string `json:"product_version"`
	}
	if err := c.get("/api/overview", &ov); err != nil {
		return err
	}
	fmt.Fprintln(out, ov.Version)
	return nil
}

func setMemoryWatermark(c *client, o *opts, out io.Writer, args []string) error {
	body := map[string]any{}
	switch {
	case len(args) == 2 && args[0] == "absolute":
		n, err := parseBytes(args[1])
		if err != nil {
			return err
		}
		body["absolute"] = n
	case len(args) == 1:
		f, err := strconv.ParseFloat(args[0], 64)
		if err != nil {
			return fmt.Errorf("set_vm_memory_high_watermark: %q is not a fraction", args[0])
		}
		body["fraction"] = f
	default:
		return errors.New("usage: warrenctl set_vm_memory_high_watermark FRACTION | absolute BYTES")
	}
	return c.do("PUT", "/api/warren/vm-memory-high-watermark", body)
}

func setDiskFreeLimit(c *client, o *opts, out io.Writer, args []string) error {
	body := map[string]any{}
	switch {
	case len(args) == 2 && args[0] == "mem_relative":
		f, err := strconv.ParseFloat(args[1], 64)
		if err != nil {
			return fmt.Errorf("set_disk_free_limit: %q is not a fraction", args[1])
		}
		body["mem_relative"] = f
	case len(args) == 1:
		n, err := parseBytes(args[0])
		if err != nil {
			return err
		}
		body["bytes"] = n
	default:
		return errors.New("usage: warrenctl set_disk_free_limit BYTES | mem_relative FRACTION")
	}
	return c.do("PUT", "/api/warren/disk-free-limit", body)
}

// parseBytes reads a size as rabbitmqctl does: a number with an optional
// unit, k/kiB, M/MiB, G/GiB (powers of 1024) or kB, MB, GB (of 1000).
func parseBytes(s string) (uint64, error) {
	units := []struct {
		suffix string
		mult   uint64
	}{
		{"kiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"kB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"TB", 1000 * 1000 * 1000 * 1000},
		{"k", 1 << 10}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	}
	num, mult := s, uint64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(strings.TrimSpace(num), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (a number of bytes, with an optional unit such as MiB or GB)", s)
	}
	return n * mult, nil
}
