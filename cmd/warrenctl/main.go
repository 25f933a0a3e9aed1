// Command warrenctl administers a running Warren through its admin API:
// rabbitmqctl and rabbitmq-plugins in one, with rabbitmqctl's verbs,
// column arguments and output.
//
//	warrenctl [--url URL] [--user U] [--password P] COMMAND [ARGS] [-p VHOST]
//	          [--formatter table|json] [-q|--quiet] [-s|--silent]
//
// Flags may come before or after the command's arguments, as with
// rabbitmqctl, so `warrenctl set_policy AE "^my-direct$"
// '{"alternate-exchange":"my-ae"}' --apply-to exchanges` works as written.
//
// Finding the broker: the admin API's URL is --url, else WARRENCTL_URL,
// else http://127.0.0.1:15672 (Warren's default admin.listen). Credentials
// are --user/--password, else WARRENCTL_USER/WARRENCTL_PASSWORD, else
// guest/guest. warrenctl checks that Warren answered, and says what did
// when something else (RabbitMQ's management plugin, say) is at the URL.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

const usage = `usage: warrenctl [--url URL] [--user USER] [--password PASSWORD] COMMAND [ARGS]

Global flags: -p VHOST, --formatter table|json, -q/--quiet, -s/--silent (no
headers), --timeout SECONDS. The admin API's URL is --url, else WARRENCTL_URL,
else http://127.0.0.1:15672.

Broker:
  status | ping | await_startup | version | list_alarms
Health checks (as rabbitmq-diagnostics; a failed check exits 69):
  check_running | check_local_alarms | check_alarms | check_port_connectivity
  check_virtual_hosts | check_certificate_expiration | listeners
  memory_breakdown [--unit byte|kb|kib|mb|mib|gb|gib|tb|tib]
  set_vm_memory_high_watermark FRACTION | set_vm_memory_high_watermark absolute BYTES
  set_disk_free_limit BYTES | set_disk_free_limit mem_relative FRACTION
Listings (columns optional, as rabbitmqctl's):
  list_queues [-p VHOST] [COLUMN...]       list_exchanges [-p VHOST] [COLUMN...]
  list_bindings [-p VHOST] [COLUMN...]     list_connections [COLUMN...]
  list_channels [COLUMN...]                list_consumers [-p VHOST] [COLUMN...]
  list_stream_connections [COLUMN...]      list_stream_consumers [-p VHOST] [COLUMN...]
  list_mqtt_connections [COLUMN...]
  list_stream_publishers [-p VHOST] [COLUMN...]
Objects:
  close_connection NAME REASON | close_all_connections [-p VHOST] REASON
  purge_queue [-p VHOST] NAME
  purge_delayed [-p VHOST] EXCHANGE (the messages a delayed-message exchange holds)
  delete_queue [-p VHOST] NAME [--if-empty] [--if-unused]
  delete_exchange [-p VHOST] NAME
Access:
  list_vhosts | add_vhost NAME | delete_vhost NAME
  list_users | add_user NAME PASSWORD | delete_user NAME
  change_password NAME PASSWORD | authenticate_user NAME PASSWORD
  list_user_permissions NAME
  set_user_tags NAME [TAG...]
  list_permissions
  set_permissions [-p VHOST] USER CONFIGURE WRITE READ
  clear_permissions [-p VHOST] USER
  list_topic_permissions [-p VHOST] | list_user_topic_permissions USER
  set_topic_permissions [-p VHOST] USER EXCHANGE WRITE READ
  clear_topic_permissions [-p VHOST] USER [EXCHANGE]
Limits:
  list_vhost_limits [-p VHOST]
  set_vhost_limits [-p VHOST] JSON (e.g. '{"max-connections": 64, "max-queues": 1000}')
  clear_vhost_limits [-p VHOST]
  list_user_limits [USER] | set_user_limits USER JSON (e.g. '{"max-channels": 100}')
  clear_user_limits USER NAME|all
Policies:
  list_policies [-p VHOST]
  set_policy [-p VHOST] [--priority N] [--apply-to queues|exchanges|all] NAME PATTERN DEFINITION
  clear_policy [-p VHOST] NAME
  list_operator_policies [-p VHOST]
  list_global_parameters
  set_global_parameter NAME VALUE
  clear_global_parameter NAME
  list_parameters [-p VHOST]
  set_parameter [-p VHOST] COMPONENT NAME VALUE (VALUE a JSON object)
  clear_parameter [-p VHOST] COMPONENT NAME
  shovel_status | delete_shovel [-p VHOST] NAME | restart_shovel [-p VHOST] NAME
  (a shovel is a parameter: set_parameter shovel NAME '{"src-uri": ...}')
  federation_status [--only-down] | restart_federation_link ID (an id federation_status lists)
  (an upstream is a parameter: set_parameter federation-upstream NAME '{"uri": ...}')
  set_operator_policy [-p VHOST] [--priority N] [--apply-to queues|exchanges|all] NAME PATTERN DEFINITION
  clear_operator_policy [-p VHOST] NAME
Cluster:
  cluster_status | forget_cluster_node NODE
  join_cluster ADDR (resets this node, then joins the cluster of the node
  whose cluster.listen is ADDR)
Quorum queues (as rabbitmq-queues):
  add_member [-p VHOST] QUEUE NODE | delete_member [-p VHOST] QUEUE NODE
  grow NODE all|even [--vhost-pattern RE] [--queue-pattern RE]
  shrink NODE
  quorum_status [-p VHOST] QUEUE | check_if_node_is_quorum_critical
  rebalance all|quorum|stream|classic [--vhost-pattern RE] [--queue-pattern RE]
Plugins:
  plugins list | plugins enable NAME | plugins disable NAME [--force]
  plugins reload NAME (enable of a changed module: a live upgrade)
  plugins configure NAME KEY VALUE | plugins reset NAME KEY
Definitions (FILE - is stdout or stdin):
  export_definitions FILE | import_definitions FILE
Profiles, for go tool pprof (written to stdout; the broker needs
admin.profiling = true, the user the administrator tag):
  profile cpu [DURATION] > cpu.pb.gz (1s to 5m, 30s by default)
  profile heap|allocs|mutex|block|goroutine|threadcreate > FILE
`

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		var failed *checkFailed
		if errors.As(err, &failed) {
			if failed.lines != nil {
				fmt.Fprintln(os.Stderr, "Error:\n"+failed.Error())
			}
			os.Exit(exitUnavailable)
		}
		fmt.Fprintln(os.Stderr, "warrenctl:", err)
		os.Exit(1)
	}
}

// opts are the parsed flags; args the positional arguments.
type opts struct {
	url, user, password, vhost, applyTo string
	vhostSet                            bool // -p was given
	vhostPattern, queuePattern          string
	formatter                           string // table or json
	unit                                string // memory_breakdown's, "gb" by default
	priority                            int
	timeout                             time.Duration
	force, ifEmpty, ifUnused            bool
	onlyDown                            bool // federation_status's
	quiet, silent                       bool
	args                                []string
}

// boolFlag is the switch a flag name sets; nil when it is not one.
func (o *opts) boolFlag(name string) *bool {
	switch name {
	case "force":
		return &o.force
	case "if-empty":
		return &o.ifEmpty
	case "if-unused":
		return &o.ifUnused
	case "only-down":
		return &o.onlyDown
	case "q", "quiet":
		return &o.quiet
	case "s", "silent":
		return &o.silent
	}
	return nil
}

func parse(argv []string) (*opts, error) {
	o := &opts{
		url: envOr("WARRENCTL_URL", "http://127.0.0.1:15672"), user: envOr("WARRENCTL_USER", "guest"),
		password: envOr("WARRENCTL_PASSWORD", "guest"), vhost: "/", applyTo: "all", formatter: "table",
	}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			o.args = append(o.args, argv[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			o.args = append(o.args, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if b := o.boolFlag(name); b != nil {
			// A switch: on alone, or as its value says (--force=false).
			*b = true
			if hasValue {
				v, err := strconv.ParseBool(value)
				if err != nil {
					return nil, fmt.Errorf("flag %s: %q is not true or false", a, value)
				}
				*b = v
			}
			continue
		}
		if name == "h" || name == "help" {
			return nil, errors.New(usage)
		}
		if !hasValue {
			if i+1 >= len(argv) {
				return nil, fmt.Errorf("flag %s needs a value", a)
			}
			i++
			value = argv[i]
		}
		switch name {
		case "url":
			o.url = value
		case "user", "u":
			o.user = value
		case "password":
			o.password = value
		case "p", "vhost":
			o.vhost, o.vhostSet = value, true
		case "apply-to":
			o.applyTo = value
		case "vhost-pattern":
			o.vhostPattern = value
		case "queue-pattern":
			o.queuePattern = value
		case "formatter":
			if value != "table" && value != "json" {
				return nil, fmt.Errorf("--formatter: %q is not one of table, json", value)
			}
			o.formatter = value
		case "timeout", "t":
			n, err := strconv.ParseFloat(value, 64)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("--timeout: %q is not a positive number of seconds", value)
			}
			o.timeout = time.Duration(n * float64(time.Second))
		case "unit":
			if _, ok := memoryUnits[strings.ToLower(value)]; !ok {
				return nil, fmt.Errorf("--unit: %q is not one of byte, kb, kib, mb, mib, gb, gib, tb, tib", value)
			}
			o.unit = strings.ToLower(value)
		case "priority":
			n, err := strconv.Atoi(value)
			if err != nil {
				return nil, fmt.Errorf("--priority: %q is not a number", value)
			}
			o.priority = n
		default:
			return nil, fmt.Errorf("unknown flag %s\n%s", a, usage)
		}
	}
	if len(o.args) == 0 {
		return nil, errors.New(usage)
	}
	return o, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func run(argv []string, out io.Writer) error {
	o, err := parse(argv)
	if err != nil {
		return err
	}
	c := &client{base: strings.TrimRight(o.url, "/"), user: o.user, password: o.password, timeout: o.timeout}
	name, args := o.args[0], o.args[1:]
	if l, ok := listings[name]; ok {
		return list(c, o, out, l, args)
	}
	cmd, ok := commands[name]
	if !ok {
		return fmt.Errorf("unknown command %q\n%s", name, usage)
	}
	if len(args) < cmd.min || (cmd.max >= 0 && len(args) > cmd.max) {
		return fmt.Errorf("usage: warrenctl %s", cmd.form)
	}
	return cmd.run(c, o, out, args)
}
