// Command warrenctl administers a running Warren through its admin API:
// rabbitmqctl and rabbitmq-plugins in one.
//
//	warrenctl [--url URL] [--user U] [--password P] COMMAND [ARGS] [-p VHOST]
//
// Flags may come before or after the command's arguments, as with
// rabbitmqctl, so `warrenctl set_policy AE "^my-direct$"
// '{"alternate-exchange":"my-ae"}' --apply-to exchanges` works as written.
// Credentials default to guest/guest, or WARRENCTL_USER and
// WARRENCTL_PASSWORD; the URL to http://127.0.0.1:15672, or WARRENCTL_URL.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

const usage = `usage: warrenctl [--url URL] [--user USER] [--password PASSWORD] COMMAND [ARGS]

Commands:
  status                                   broker overview
  list_vhosts | add_vhost NAME | delete_vhost NAME
  list_users | add_user NAME PASSWORD | delete_user NAME
  set_user_tags NAME [TAG...]
  list_permissions
  set_permissions [-p VHOST] USER CONFIGURE WRITE READ
  clear_permissions [-p VHOST] USER
  list_queues [-p VHOST] | list_exchanges [-p VHOST] | list_bindings [-p VHOST]
  list_connections
  list_policies [-p VHOST]
  set_policy [-p VHOST] [--priority N] [--apply-to queues|exchanges|all] NAME PATTERN DEFINITION
  clear_policy [-p VHOST] NAME
  export_definitions FILE | import_definitions FILE    (FILE - is stdout/stdin)
  plugins list
  plugins enable NAME
  plugins disable NAME [--force]
`

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "warrenctl:", err)
		os.Exit(1)
	}
}

// opts are the parsed flags; args the positional arguments.
type opts struct {
	url, user, password, vhost, applyTo string
	priority                            int
	force                               bool
	args                                []string
}

func parse(argv []string) (*opts, error) {
	o := &opts{
		url: envOr("WARRENCTL_URL", "http://127.0.0.1:15672"), user: envOr("WARRENCTL_USER", "guest"),
		password: envOr("WARRENCTL_PASSWORD", "guest"), vhost: "/", applyTo: "all",
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
		if name == "force" {
			o.force = true
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
			o.vhost = value
		case "apply-to":
			o.applyTo = value
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
	c := &client{base: strings.TrimRight(o.url, "/"), user: o.user, password: o.password}
	cmd, args := o.args[0], o.args[1:]
	need := func(n int, form string) error {
		if len(args) != n {
			return fmt.Errorf("usage: warrenctl %s", form)
		}
		return nil
	}
	vh := url.PathEscape(o.vhost)
	switch cmd {
	case "status":
		var ov map[string]any
		if err := c.get("/api/overview", &ov); err != nil {
			return err
		}
		pretty, _ := json.MarshalIndent(ov, "", "  ")
		fmt.Fprintln(out, string(pretty))
		return nil
	case "list_vhosts":
		return c.table(out, "/api/vhosts", "name")
	case "add_vhost":
		if err := need(1, "add_vhost NAME"); err != nil {
			return err
		}
		return c.do("PUT", "/api/vhosts/"+url.PathEscape(args[0]), nil)
	case "delete_vhost":
		if err := need(1, "delete_vhost NAME"); err != nil {
			return err
		}
		return c.do("DELETE", "/api/vhosts/"+url.PathEscape(args[0]), nil)
	case "list_users":
		return c.table(out, "/api/users", "name", "tags")
	case "add_user":
		if err := need(2, "add_user NAME PASSWORD"); err != nil {
			return err
		}
		return c.do("PUT", "/api/users/"+url.PathEscape(args[0]), map[string]any{"password": args[1], "tags": []string{}})
	case "set_user_tags":
		if len(args) < 1 {
			return errors.New("usage: warrenctl set_user_tags NAME [TAG...]")
		}
		return c.do("PUT", "/api/users/"+url.PathEscape(args[0]), map[string]any{"tags": append([]string{}, args[1:]...)})
	case "delete_user":
		if err := need(1, "delete_user NAME"); err != nil {
			return err
		}
		return c.do("DELETE", "/api/users/"+url.PathEscape(args[0]), nil)
	case "list_permissions":
		return c.table(out, "/api/permissions", "vhost", "user", "configure", "write", "read")
	case "set_permissions":
		if err := need(4, "set_permissions [-p VHOST] USER CONFIGURE WRITE READ"); err != nil {
			return err
		}
		return c.do("PUT", "/api/permissions/"+vh+"/"+url.PathEscape(args[0]),
			map[string]string{"configure": args[1], "write": args[2], "read": args[3]})
	case "clear_permissions":
		if err := need(1, "clear_permissions [-p VHOST] USER"); err != nil {
			return err
		}
		return c.do("DELETE", "/api/permissions/"+vh+"/"+url.PathEscape(args[0]), nil)
	case "list_queues":
		return c.table(out, "/api/queues/"+vh, "name", "messages_ready", "messages_unacknowledged", "consumers", "durable", "policy")
	case "list_exchanges":
		return c.table(out, "/api/exchanges/"+vh, "name", "type", "durable", "auto_delete", "internal", "policy")
	case "list_bindings":
		return c.table(out, "/api/bindings/"+vh, "source", "destination_type", "destination", "routing_key", "arguments")
	case "list_connections":
		return c.table(out, "/api/connections", "name", "user", "vhost", "channels")
	case "list_policies":
		return c.table(out, "/api/policies/"+vh, "name", "pattern", "apply-to", "priority", "definition")
	case "set_policy":
		if err := need(3, "set_policy [-p VHOST] [--priority N] [--apply-to queues|exchanges|all] NAME PATTERN DEFINITION"); err != nil {
			return err
		}
		var def map[string]any
		if err := json.Unmarshal([]byte(args[2]), &def); err != nil {
			return fmt.Errorf("set_policy: definition %q is not a JSON object: %v", args[2], err)
		}
		return c.do("PUT", "/api/policies/"+vh+"/"+url.PathEscape(args[0]), map[string]any{
			"pattern": args[1], "definition": def, "priority": o.priority, "apply-to": o.applyTo,
		})
	case "clear_policy":
		if err := need(1, "clear_policy [-p VHOST] NAME"); err != nil {
			return err
		}
		return c.do("DELETE", "/api/policies/"+vh+"/"+url.PathEscape(args[0]), nil)
	case "plugins":
		return plugins(c, out, args, o.force)
	case "export_definitions":
		return exportDefinitions(c, out, args)
	case "import_definitions":
		return importDefinitions(c, out, args)
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, usage)
}

func plugins(c *client, out io.Writer, args []string, force bool) error {
	if len(args) == 0 {
		return errors.New("usage: warrenctl plugins list | enable NAME | disable NAME [--force]")
	}
	switch args[0] {
	case "list":
		return c.table(out, "/api/plugins", "name", "enabled", "version", "types", "state")
	case "enable", "disable":
		if len(args) != 2 {
			return fmt.Errorf("usage: warrenctl plugins %s NAME", args[0])
		}
		path := "/api/plugins/" + url.PathEscape(args[1]) + "/" + args[0]
		if force {
			path += "?force=true"
		}
		if err := c.do("POST", path, nil); err != nil {
			return err
		}
		fmt.Fprintf(out, "plugin %s %sd\n", args[1], args[0])
		return nil
	}
	return fmt.Errorf("unknown plugins command %q", args[0])
}

type client struct {
	base, user, password string
}

func (c *client) do(method, path string, body any) error {
	return c.request(method, path, body, nil)
}

func (c *client) get(path string, out any) error {
	return c.request("GET", path, nil, out)
}

func (c *client) request(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.SetBasicAuth(c.user, c.password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the admin API at %s: %v", c.base, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var e struct{ Error, Reason string }
		if json.Unmarshal(data, &e) == nil && e.Reason != "" {
			return fmt.Errorf("%s (%s)", e.Reason, resp.Status)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// table prints the chosen columns of a list endpoint, tab-aligned.
func (c *client) table(out io.Writer, path string, cols ...string) error {
	var rows []map[string]any
	if err := c.get(path, &rows); err != nil {
		return err
	}
	sort.SliceStable(rows, func(i, j int) bool { return fmt.Sprint(rows[i][cols[0]]) < fmt.Sprint(rows[j][cols[0]]) })
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	for _, r := range rows {
		cells := make([]string, len(cols))
		for i, col := range cols {
			cells[i] = cell(r[col])
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = cell(e)
		}
		return strings.Join(parts, ",")
	case map[string]any:
		if len(x) == 0 {
			return ""
		}
		b, _ := json.Marshal(x)
		return string(b)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}
