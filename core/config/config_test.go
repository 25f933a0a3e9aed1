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
