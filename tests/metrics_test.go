package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/topology"
)

// hostileNames are queue names that break a hand-written exposition: a
// tab, a quote, a backslash, a newline, and markup. A new queue may no
// longer be named with a tab or a newline (core/names), but one an older
// Warren stored still is, so those two are restored rather than declared.
var hostileNames = []string{"tab\tq", `quote"q`, `back\slash`, "new\nline", "<img src=x onerror=alert(1)>"}

// /metrics is Prometheus's text format as client_golang writes it: every
// label value round-trips whatever the queue is called, the counters and
// gauges the issue names are there, and promtool (Prometheus's own
// checker) accepts the scrape when it is installed.
func TestPrometheusMetrics(t *testing.T) {
	s := startWarren(t, func(c *config.Config) { c.Admin.Listen = "127.0.0.1:0" })
	if err := s.b.ServeAdmin(admin.Handler(s.b)); err != nil {
		t.Fatal(err)
	}
	if err := s.b.EnablePlugin("consistent-hash"); err != nil {
		t.Fatal(err)
	}
	_, ch := confirmChannel(t, s)
	v, _ := s.b.VHost("/")
	for _, name := range hostileNames {
		if strings.ContainsAny(name, "\t\n") {
			if err := v.RestoreQueue(topology.QueueDef{Name: name}, 0, nil); err != nil {
				t.Fatal(err)
			}
		} else if _, err := ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		s.ownQueue(name)
		publishConfirmed(t, ch, "", name, body("m"))
	}
	x := declareExchange(t, s, ch, "metrics-hash", "x-consistent-hash", nil)
	bind(t, ch, hostileNames[0], "1", x, nil)
	publishConfirmed(t, ch, x, "k", body("hashed"))

	scrape, families := scrapeMetrics(t, s)

	ready := map[string]float64{}
	for _, m := range family(t, families, "warren_queue_messages_ready").Metric {
		ready[label(m, "queue")] = m.GetGauge().GetValue()
	}
	for _, name := range hostileNames {
		want := 1.0
		if name == hostileNames[0] {
			want = 2 // also bound to the hash exchange
		}
		if ready[name] != want {
			t.Errorf("warren_queue_messages_ready{queue=%q} = %v, want %v", name, ready[name], want)
		}
	}
	published := sumOf(family(t, families, "warren_messages_published_total"), "vhost", "/")
	if published != float64(len(hostileNames)+1) {
		t.Errorf("warren_messages_published_total{vhost=\"/\"} = %v, want %d", published, len(hostileNames)+1)
	}
	routeCalls := family(t, families, "warren_plugin_route_duration_seconds")
	if len(routeCalls.Metric) != 1 || label(routeCalls.Metric[0], "plugin") != "consistent-hash" || routeCalls.Metric[0].GetHistogram().GetSampleCount() != 1 {
		t.Errorf("plugin route histogram: %v", routeCalls.Metric)
	}
	for _, name := range []string{
		"warren_build_info", "warren_uptime_seconds", "warren_messages_confirmed_total", "warren_messages_delivered_total",
		"warren_messages_dead_lettered_total", "warren_queue_consumers", "warren_queue_messages_unacked",
		"warren_queue_messages_ready_bytes", "warren_connections", "warren_channels", "warren_consumers",
		"warren_queues", "warren_connections_opened_total", "warren_memory_used_bytes", "warren_memory_watermark_bytes",
		"warren_disk_free_bytes", "warren_disk_free_limit_bytes", "warren_alarm", "warren_store_wal_bytes_written_total",
		"warren_store_compaction_debt_bytes", "warren_store_block_cache_hits_total", "warren_plugin_route_failures_total",
		"process_resident_memory_bytes", "process_open_fds", "go_goroutines",
	} {
		family(t, families, name)
	}

	promtool, err := exec.LookPath("promtool")
	if p := os.Getenv("PROMTOOL"); p != "" {
		promtool, err = p, nil
	}
	if err != nil {
		if required("promtool") {
			t.Fatal("promtool not found, and WARREN_REQUIRE names it")
		}
		t.Log("promtool not installed (Debian's prometheus package, or PROMTOOL=path): the scrape was checked by client_golang's parser only")
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(scrape)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// scrapeMetrics GETs /metrics and parses it.
func scrapeMetrics(t *testing.T, s *server) ([]byte, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := http.Get("http://" + s.b.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scrape, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(scrape))
	if err != nil {
		t.Fatalf("the scrape does not parse: %v\n%s", err, scrape)
	}
	return scrape, families
}

// The Grafana dashboard in examples/ queries only metrics Warren exports.
func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	s := startWarren(t, func(c *config.Config) { c.Admin.Listen = "127.0.0.1:0" })
	if err := s.b.ServeAdmin(admin.Handler(s.b)); err != nil {
		t.Fatal(err)
	}
	if err := s.b.EnablePlugin("consistent-hash"); err != nil { // for the plugin series
		t.Fatal(err)
	}
	_, ch := channel(t, s)
	declareQueue(t, s, ch, "dashboard", nil) // for the per-queue series
	_, families := scrapeMetrics(t, s)
	raw, err := os.ReadFile("../examples/grafana/warren-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	metricName := regexp.MustCompile(`\b(warren|process|go)_[a-z_]+`)
	queried := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			for _, name := range metricName.FindAllString(target.Expr, -1) {
				queried++
				base := name
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if f, ok := families[strings.TrimSuffix(name, suffix)]; ok && f.GetType() == dto.MetricType_HISTOGRAM {
						base = strings.TrimSuffix(name, suffix)
					}
				}
				if _, ok := families[base]; !ok {
					t.Errorf("panel %q queries %s, which /metrics does not export", p.Title, name)
				}
			}
		}
	}
	if queried < 40 {
		t.Fatalf("found only %d metric names in the dashboard's queries", queried)
	}
}

func family(t *testing.T, families map[string]*dto.MetricFamily, name string) *dto.MetricFamily {
	t.Helper()
	f, ok := families[name]
	if !ok {
		t.Fatalf("no %s in the scrape", name)
	}
	return f
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// sumOf adds the family's counter values whose label has value.
func sumOf(f *dto.MetricFamily, name, value string) float64 {
	total := 0.0
	for _, m := range f.Metric {
		if label(m, name) == value {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}
