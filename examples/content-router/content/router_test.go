package content

import (
	"slices"
	"strings"
	"testing"

	"github.com/warrenmq/warren/sdk"
)

func TestLookup(t *testing.T) {
	doc := []byte(` {"order": {"country": "NO", "total": 120.5, "rush": true, "items": [{"sku": "a1"}, {"sku": "b\u00e92"}],
		"note": "say \"hi\"", "x-tag": null, "nested": {"deep": {"er": [1, [2, 3]]}}}, "empty": {}, "list": []} `)
	cases := []struct {
		path string
		want string
		ok   bool
	}{
		{"order.country", `"NO"`, true},
		{"order.total", `120.5`, true},
		{"order.rush", `true`, true},
		{"order.items.1.sku", `"b\u00e92"`, true},
		{"order.items.2.sku", ``, false},
		{"order.items.x", ``, false},
		{"order.note", `"say \"hi\""`, true},
		{"order.x-tag", `null`, true},
		{"order.nested.deep.er.1.0", `2`, true},
		{"order.missing", ``, false},
		{"order.country.more", ``, false},
		{"empty.a", ``, false},
		{"list.0", ``, false},
		{"order", string(doc[strings.Index(string(doc), `{"country"`):strings.Index(string(doc), `, "empty"`)]), true},
	}
	for _, c := range cases {
		got, ok := lookup(doc, strings.Split(c.path, "."))
		if ok != c.ok || string(got) != c.want {
			t.Errorf("%s: got %q %v, want %q %v", c.path, got, ok, c.want, c.ok)
		}
	}
	for _, bad := range []string{``, `{`, `{"a"`, `{"a":}`, `{"b":1,}`, `[1,,2]`, `nul`, `{"a":"\"}`, `{"a": 1e}`} {
		if v, ok := lookup([]byte(bad), []string{"a"}); ok {
			t.Errorf("lookup in %q found %q", bad, v)
		}
	}
}

func TestStringEquals(t *testing.T) {
	cases := []struct {
		lit, s string
		want   bool
	}{
		{`"NO"`, "NO", true},
		{`"NO"`, "NOR", false},
		{`"NOR"`, "NO", false},
		{`"a\"b"`, `a"b`, true},
		{`"a\\b"`, `a\b`, true},
		{`"\/\n\t"`, "/\n\t", true},
		{`"caf\u00e9"`, "café", true},
		{`"caf\u00E9"`, "café", true},
		{`"\ud83d\ude00"`, "😀", true},
		{`"\u12"`, "", false},
		{`"x\q"`, "x", false},
	}
	for _, c := range cases {
		if got := stringEquals([]byte(c.lit), c.s); got != c.want {
			t.Errorf("stringEquals(%s, %q) = %v", c.lit, c.s, got)
		}
	}
}

func table(t *testing.T, m map[string]any) sdk.Table {
	t.Helper()
	tb, err := sdk.MakeTable(m)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestRoute binds the way the README does and routes bodies natively,
// through the same code the module runs.
func TestRoute(t *testing.T) {
	x, err := Type{}.Create(&sdk.Declaration{Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	bindings := []map[string]any{
		1: {"x-path": "order.country", "x-value": "NO"},
		2: {"order.country": "SE", "order.total": 100, "x-match": "any"},
		3: {"order.rush": true, "order.country": "NO"},
		4: {"order.items.0.sku": nil}, // void: the field exists
		5: {"x-path": "x-meta.source", "x-value": "web"},
	}
	for id, args := range bindings {
		if args == nil {
			continue
		}
		b := &sdk.Binding{ID: sdk.BindingID(id), Destination: "q", Args: table(t, args)}
		if err := x.ValidateBinding(b); err != nil {
			t.Fatalf("binding %d: %v", id, err)
		}
		if err := x.AddBinding(b); err != nil {
			t.Fatalf("binding %d: %v", id, err)
		}
	}
	route := func(body string) []sdk.BindingID {
		m, _ := sdk.MakeMessage("", nil, []byte(body))
		var r sdk.Result
		if err := x.Route(m, &r); err != nil {
			t.Fatal(err)
		}
		ids := r.Bindings()
		slices.Sort(ids)
		return ids
	}
	cases := []struct {
		body string
		want []sdk.BindingID
	}{
		{`{"order": {"country": "NO"}}`, []sdk.BindingID{1}},
		{`{"order": {"country": "NO", "rush": true, "items": [{"sku": 7}]}}`, []sdk.BindingID{1, 3, 4}},
		{`{"order": {"country": "SE"}}`, []sdk.BindingID{2}},
		{`{"order": {"country": "DK", "total": 100.0}}`, []sdk.BindingID{2}},
		{`{"order": {"country": "DK", "total": "100"}}`, []sdk.BindingID{}},
		{`{"x-meta": {"source": "web"}}`, []sdk.BindingID{5}},
		{`not json`, []sdk.BindingID{}},
		{``, []sdk.BindingID{}},
	}
	for _, c := range cases {
		if got := route(c.body); !slices.Equal(got, c.want) {
			t.Errorf("%s: routed to %v, want %v", c.body, got, c.want)
		}
	}
	if err := x.RemoveBindings([]sdk.BindingID{1, 3}); err != nil {
		t.Fatal(err)
	}
	if got := route(`{"order": {"country": "NO", "rush": true}}`); len(got) != 0 {
		t.Errorf("after unbinding: routed to %v", got)
	}
	info := x.(sdk.Informer).Info()
	if info["bindings"] != 3 {
		t.Errorf("info: %v", info)
	}
}

func TestMaxBody(t *testing.T) {
	x, _ := Type{}.Create(&sdk.Declaration{})
	// Settings change in a running broker, for exchanges already made.
	if err := SettingsChanged(table(t, map[string]any{"max_body": 16})); err != nil {
		t.Fatal(err)
	}
	defer SettingsChanged(table(t, map[string]any{}))
	for _, bad := range []any{0, -5, "big"} {
		if err := SettingsChanged(table(t, map[string]any{"max_body": bad})); err == nil {
			t.Errorf("max_body %v accepted", bad)
		}
	}
	_ = x.AddBinding(&sdk.Binding{ID: 1, Args: table(t, map[string]any{"a": "b"})})
	for body, want := range map[string]int{`{"a": "b"}`: 1, `{"a": "b", "padding": "xxxx"}`: 0} {
		m, _ := sdk.MakeMessage("", nil, []byte(body))
		var r sdk.Result
		if err := x.Route(m, &r); err != nil || r.Len() != want {
			t.Errorf("%s: %d matches, want %d (%v)", body, r.Len(), want, err)
		}
	}
}

func TestBindingErrors(t *testing.T) {
	x, _ := Type{}.Create(&sdk.Declaration{})
	cases := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, "needs at least one field"},
		{map[string]any{"x-match": "some", "a": "b"}, "x-match must be 'all' or 'any'"},
		{map[string]any{"x-path": 7}, "x-path must be a string"},
		{map[string]any{"x-value": "NO"}, "x-value needs x-path"},
		{map[string]any{"a..b": "x"}, "empty segment"},
		{map[string]any{"a": map[string]any{}}, "must be a string, number, boolean or void"},
	}
	for _, c := range cases {
		err := x.ValidateBinding(&sdk.Binding{Args: table(t, c.args)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.args, err, c.want)
			continue
		}
		if e, ok := err.(*sdk.Error); !ok || e.Code != sdk.PreconditionFailed {
			t.Errorf("%v: want a 406 *sdk.Error, got %#v", c.args, err)
		}
	}
}

func BenchmarkRoute(b *testing.B) {
	x, _ := Type{}.Create(&sdk.Declaration{})
	for i, c := range []string{"NO", "SE", "DK", "FI"} {
		args, _ := sdk.MakeTable(map[string]any{"x-path": "order.country", "x-value": c})
		_ = x.AddBinding(&sdk.Binding{ID: sdk.BindingID(i), Args: args})
	}
	m, _ := sdk.MakeMessage("", nil, []byte(`{"order": {"id": 12345, "customer": "acme", "country": "DK", "total": 99.5}}`))
	var r sdk.Result
	b.ReportAllocs()
	for b.Loop() {
		r.Reset()
		_ = x.Route(m, &r)
	}
}
