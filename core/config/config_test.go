package config

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestShippedFileIsTheDefaults keeps broker.toml and Default in step: the
// file documents every setting with its default value.
func TestShippedFileIsTheDefaults(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(here), "..", "..", "broker.toml")
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	for _, c := range []*Config{&got, &want} {
		// An empty list or table in the file and none in Default are the same.
		if len(c.Plugins.Enabled) == 0 {
			c.Plugins.Enabled = nil
		}
		if len(c.Plugins.Settings) == 0 {
			c.Plugins.Settings = nil
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("broker.toml differs from config.Default():\nfile:     %+v\ndefaults: %+v", got, want)
	}
}

func TestUnknownKeyNamesKeyAndLine(t *testing.T) {
	src := "[log]\nlevel = \"debug\"\n\n[amqp]\nlisten = \"127.0.0.1:1\"\nlistne = \"x\"\n"
	_, err := Parse("test.toml", []byte(src))
	if err == nil || !strings.Contains(err.Error(), "test.toml:6") || !strings.Contains(err.Error(), "amqp.listne") {
		t.Fatalf("got %v, want an error naming amqp.listne at line 6", err)
	}
	_, err = Parse("test.toml", []byte("[bogus]\nx = 1\n"))
	if err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("got %v", err)
	}
}

func TestSyntaxErrorNamesLine(t *testing.T) {
	_, err := Parse("b.toml", []byte("[log]\nlevel = \n"))
	if err == nil || !strings.Contains(err.Error(), "b.toml:2") {
		t.Fatalf("got %v", err)
	}
}

func TestValuesAndUnits(t *testing.T) {
	c, err := Parse("t", []byte(`
[limits]
heartbeat = "5s"
max_message_size = "1KiB"
[resources]
disk_free_limit = 1000
[admin]
max_connections = 8
[plugins.settings.foo]
anything = [1, 2]
`))
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(c.Limits.Heartbeat) != 5*time.Second || c.Limits.MaxMessageSize != 1024 || c.Resources.DiskFreeLimit != 1000 || c.Admin.MaxConnections != 8 {
		t.Fatalf("got %+v", c)
	}
	if c.Plugins.Settings["foo"]["anything"] == nil {
		t.Fatal("plugin settings lost")
	}
	for _, bad := range []string{
		"[limits]\nheartbeat = \"5\"\n",
		"[limits]\nmax_message_size = \"lots\"\n",
		"[log]\nlevel = \"loud\"\n",
		"[limits]\nframe_max = 100\n",
		"[resources]\nmemory_high_watermark = 2.0\n",
		"[admin]\nmax_connections = -1\n",
	} {
		if _, err := Parse("t", []byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"))
	if err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("got %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestAdminRealmRefusesHeaderBreakers(t *testing.T) {
	for _, realm := range []string{`say "hi"`, "a\nb", `back\slash`} {
		c := Default()
		c.Admin.Realm = realm
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "admin.realm") {
			t.Errorf("realm %q: %v", realm, err)
		}
	}
	if c := Default(); c.Admin.Realm != "RabbitMQ Management" || c.Validate() != nil {
		t.Fatalf("default realm %q", c.Admin.Realm)
	}
}

// amqp.listen takes one address or a list; a bad one is named.
func TestListenAddresses(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want Addrs
		err  string
	}{
		{`listen = "127.0.0.1:5672"`, Addrs{"127.0.0.1:5672"}, ""},
		{`listen = ["0.0.0.0:5672", "[::]:5672"]`, Addrs{"0.0.0.0:5672", "[::]:5672"}, ""},
		{`listen = ["127.0.0.1"]`, nil, `amqp.listen: "127.0.0.1" is not host:port`},
		{`listen = [5672]`, nil, "5672 is not an address"},
		{`listen = 5672`, nil, "5672 is not an address"},
	} {
		c, err := Parse("t", []byte("[amqp]\n"+tc.src+"\n"))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: got %v, want an error containing %q", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(c.AMQP.Listen, tc.want) {
			t.Errorf("%s: got %v, %v; want %v", tc.src, c.AMQP.Listen, err, tc.want)
		}
	}
	if _, err := Parse("t", []byte("[amqp]\nlisten = []\n")); err == nil || !strings.Contains(err.Error(), "at least one") {
		t.Errorf("no listener at all: %v", err)
	}
}

// TestValidateRefuses has one row per value the broker must not start
// with: a wrong sign, a zero that means nothing, NaN or infinity, a size
// whose unit overflows, a value out of its range. Each refusal names the
// key as section.key and says what is allowed.
func TestValidateRefuses(t *testing.T) {
	for _, tc := range []struct {
		section, setting string // section, then key = value
		allowed          string // part of the refusal that says what may be
	}{
		{"resources", "memory_high_watermark = nan", "[0, 1)"},
		{"resources", "memory_high_watermark = +inf", "[0, 1)"},
		{"resources", "memory_high_watermark = -inf", "[0, 1)"},
		{"resources", "memory_high_watermark = -0.1", "[0, 1)"},
		{"resources", "memory_high_watermark = 1.0", "[0, 1)"},
		{"resources", `disk_free_limit = "99999999TiB"`, "too large"},
		{"resources", `disk_free_limit = "-1"`, "whole number"},
		{"limits", `heartbeat = "-5s"`, "whole seconds between 0s"},
		{"limits", `heartbeat = "500ms"`, "whole seconds"},
		{"limits", `heartbeat = "1.5s"`, "whole seconds"},
		{"limits", `heartbeat = "65536s"`, "18h12m15s"},
		{"limits", `heartbeat = "60"`, "with a unit"},
		{"limits", `handshake_timeout = "0s"`, "must be positive"},
		{"limits", `handshake_timeout = "-1s"`, "must be positive"},
		{"limits", `shutdown_timeout = "0s"`, "must be positive"},
		{"limits", "frame_max = 0", "between the protocol's minimum 4096 and 4294967295"},
		{"limits", "frame_max = 4095", "4096"},
		{"limits", "frame_max = -1", "4096"},
		{"limits", "frame_max = 4294967296", "4294967295"},
		{"limits", "channel_max = 0", "between 1 and 65535"},
		{"limits", "channel_max = -1", "between 1 and 65535"},
		{"limits", "channel_max = 65536", "between 1 and 65535"},
		{"limits", "max_connections = -1", "must not be negative"},
		{"limits", "max_handshakes = -1", "must not be negative"},
		{"limits", `max_message_size = "999999TiB"`, "between 1 and 536870912"},
		{"limits", `max_message_size = "99999999TiB"`, "too large"},
		{"limits", `max_message_size = "513MiB"`, "between 1 and 536870912"},
		{"limits", "max_message_size = 0", "between 1 and 536870912"},
		{"limits", `max_message_size = "-1"`, "whole number"},
		{"limits", "max_message_size = 1.5", "whole number"},
		{"limits", `max_message_size = "18446744073709551616"`, "too large"},
		{"defaults", `user = ""`, "must not be empty"},
		{"defaults", `password = ""`, "must not be empty"},
		{"defaults", `vhost = ""`, "must not be empty"},
		{"defaults", `vhost = "a\u0000b"`, "holds a control character"},
		{"defaults", `user = "admin\u202e"`, "holds a bidirectional formatting character"},
		{"admin", "max_connections = -1", "must not be negative"},
		{"admin", `stats_interval = "0s"`, "between 10ms and 1h0m0s"},
		{"admin", `stats_interval = "-5s"`, "between 10ms and 1h0m0s"},
		{"admin", `stats_interval = "2h"`, "between 10ms and 1h0m0s"},
		{"admin", `listen = "localhost"`, "host:port"},
		{"admin", "max_body_size = 0", "between 1024 (1KiB) and 1073741824 (1GiB)"},
		{"admin", `max_body_size = "2GiB"`, "between 1024 (1KiB) and 1073741824 (1GiB)"},
		{"admin", `max_body_size = "99999999TiB"`, "too large"},
		{"admin", `profiling = "yes"`, "type boolean"},
		{"admin", "profiling = 1", "type boolean"},
		{"storage", `sync_interval = "0s"`, "between 1ms and 1h0m0s"},
		{"storage", `sync_interval = "1us"`, "between 1ms and 1h0m0s"},
		{"storage", `sync_interval = "2h"`, "between 1ms and 1h0m0s"},
		{"storage", "queue_memory_messages = -1", "must not be negative"},
		{"storage", "queue_memory_stored_messages = -1", "storage.queue_memory_stored_messages: -1 must not be negative"},
		{"storage", `queue_memory_bytes = "9223372036854775808"`, "more than the most"},
		{"storage", `queue_memory_stored_bytes = "9223372036854775808"`, "storage.queue_memory_stored_bytes: 9223372036854775808 is more than the most"},
		{"resources", "memory_paging_ratio = 1.5", "resources.memory_paging_ratio: 1.5 must be a fraction in [0, 1]"},
		{"resources", "memory_paging_ratio = -0.1", "resources.memory_paging_ratio: -0.1 must be a fraction"},
		{"storage", "cache_size = 0", "between 1048576 (1MiB)"},
		{"storage", `cache_size = "1KiB"`, "between 1048576 (1MiB)"},
		{"storage", `cache_size = "8388608TiB"`, "between 1048576 (1MiB)"},
		{"storage", `body_log_min = "1KiB"`, "storage.body_log_min: 1024 must be 0 (off) or between 8192 (8KiB)"},
		{"storage", `body_log_min = "2GiB"`, "storage.body_log_min: 2147483648 must be 0 (off)"},
		{"storage", `data_dir = ""`, "must not be empty"},
		{"cluster", `change_timeout = "0s"`, "must be positive"},
		{"cluster", `change_timeout = "-1s"`, "must be positive"},
	} {
		src := "[" + tc.section + "]\n" + tc.setting + "\n"
		key := tc.section + "." + strings.TrimSpace(strings.SplitN(tc.setting, "=", 2)[0])
		_, err := Parse("t", []byte(src))
		if err == nil {
			t.Errorf("%s: accepted", tc.setting)
			continue
		}
		if !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), tc.allowed) {
			t.Errorf("%s: %v; want it to name %s and say %q", tc.setting, err, key, tc.allowed)
		}
	}
}

// TestValidateEdges takes the ends of each range.
func TestValidateEdges(t *testing.T) {
	for _, src := range []string{
		"[resources]\nmemory_high_watermark = 0.0\n",
		"[resources]\nmemory_high_watermark = 0.99\n",
		"[resources]\ndisk_free_limit = 0\n",
		"[limits]\nheartbeat = \"0s\"\n",
		"[limits]\nheartbeat = \"65535s\"\n",
		"[limits]\nframe_max = 4096\n",
		"[limits]\nframe_max = 4294967295\n",
		"[limits]\nchannel_max = 1\n",
		"[limits]\nchannel_max = 65535\n",
		"[limits]\nmax_message_size = \"512MiB\"\n",
		"[limits]\nmax_message_size = 1\n",
		"[limits]\nmax_connections = 0\n",
		"[admin]\nlisten = \"\"\nstats_interval = \"10ms\"\n",
		"[admin]\nstats_interval = \"1h\"\n",
		"[storage]\nsync_interval = \"1ms\"\nqueue_memory_messages = 0\nqueue_memory_bytes = 0\ncache_size = \"1MiB\"\n",
		"[storage]\nqueue_memory_bytes = \"9223372036854775807\"\n",
		"[storage]\ncache_size = \"8388607TiB\"\n",
	} {
		if _, err := Parse("t", []byte(src)); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
}

// node_name names the node for listings; set beside cluster.node_name it
// must be the same name.
func TestNodeName(t *testing.T) {
	for _, c := range []struct {
		toml, want string
	}{
		{"node_name = \"rabbit@box\"\n", ""},
		{"node_name = \"rabbit@box\"\n[cluster]\nnode_name = \"rabbit@box\"\nlisten = \"127.0.0.1:25672\"\nsecret = \"0123456789abcdef\"\n", ""},
		{"node_name = \"rabbit@box\"\n[cluster]\nnode_name = \"n1\"\nlisten = \"127.0.0.1:25672\"\nsecret = \"0123456789abcdef\"\n", `node_name: "rabbit@box" differs from cluster.node_name "n1"`},
		{"node_name = \"rabbit box\"\n", "space or a control character"},
	} {
		path := filepath.Join(t.TempDir(), "broker.toml")
		if err := os.WriteFile(path, []byte(c.toml), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(path)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.toml, err)
		case c.want == "" && cfg.NodeName != "rabbit@box":
			t.Errorf("%q: node name %q", c.toml, cfg.NodeName)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want an error with %q", c.toml, err, c.want)
		}
	}
}

// Static shovels: named, one name once per vhost, with a definition
// (which the broker checks key by key when it starts).
func TestStaticShovels(t *testing.T) {
	good := "[[shovels]]\nname = \"s\"\n[shovels.definition]\n\"src-uri\" = \"amqp://\"\n\"src-queue\" = \"q\"\n\"dest-uri\" = \"amqp://\"\n\"src-prefetch-count\" = 10\n"
	c, err := Parse("broker.toml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Shovels) != 1 || c.Shovels[0].Name != "s" || c.Shovels[0].Definition["src-prefetch-count"] != int64(10) {
		t.Fatalf("shovels: %+v", c.Shovels)
	}
	for src, want := range map[string]string{
		"[[shovels]]\n[shovels.definition]\n\"src-uri\" = \"amqp://\"\n": "shovels[0]: a shovel needs a name",
		"[[shovels]]\nname = \"s\"\n":                                    "shovels[0] (s): a shovel needs a definition",
		good + good:                                                      `shovels[1]: a second shovel named "s"`,
	} {
		if _, err := Parse("broker.toml", []byte(src)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", src, err, want)
		}
	}
}
