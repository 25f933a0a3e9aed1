package admin

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
)

type item struct {
	Name     string `json:"name"`
	Messages int    `json:"messages"`
	Stats    struct {
		Publish int `json:"publish"`
	} `json:"message_stats"`
}

var itemLister = lister[item]{name: func(i item) string { return i.Name }}

func items() []item {
	var out []item
	for i, n := range []string{"b10", "a2", "C3", "a10", "zz", "aliveness"} {
		it := item{Name: n, Messages: i % 3}
		it.Stats.Publish = 10 - i
		out = append(out, it)
	}
	return out
}

// Paging, filtering and sorting as RabbitMQ 3.10.8 answers (the cases
// with these names were run against it).
func TestPaging(t *testing.T) {
	cases := []struct {
		query string
		want  string // the answer, with items as names
		err   string // the error body instead
	}{
		{"", "C3,a10,a2,aliveness,b10,zz", ""},
		{"name=a", "C3,a10,a2,aliveness,b10,zz", ""}, // no page: no filter
		{"sort=name&sort_reverse=true", "zz,b10,aliveness,a2,a10,C3", ""},
		{"sort=messages", "a10,b10,a2,zz,C3,aliveness", ""},              // ties keep name order
		{"sort=message_stats.publish", "aliveness,zz,a10,C3,a2,b10", ""}, // a dotted path
		{"sort=bogus", "C3,a10,a2,aliveness,b10,zz", ""},                 // unknown: name order
		{"page=1", `{"filtered_count":6,"item_count":6,"items":C3,a10,a2,aliveness,b10,zz,"page":1,"page_count":1,"page_size":100,"total_count":6}`, ""},
		{"page=2&page_size=4", `{"filtered_count":6,"item_count":2,"items":b10,zz,"page":2,"page_count":2,"page_size":4,"total_count":6}`, ""},
		{"page=1&name=A", `{"filtered_count":3,"item_count":3,"items":a10,a2,aliveness,"page":1,"page_count":1,"page_size":100,"total_count":6}`, ""},
		{"page=1&name=%5Ea.0%24&use_regex=true", `{"filtered_count":1,"item_count":1,"items":a10,"page":1,"page_count":1,"page_size":100,"total_count":6}`, ""},
		{"page=1&name=nomatch", `{"filtered_count":0,"item_count":0,"items":,"page":1,"page_count":0,"page_size":100,"total_count":6}`, ""},
		{"page=3&page_size=3", "", `page_out_of_range: Page out of range, page: 3 page size: 3, len: 6`},
		{"page=0&page_size=3", "", `invalid_pagination_parameters: Invalid pagination parameters: page number 0, page size 3`},
		{"page=1&page_size=501", "", `invalid_pagination_parameters: Invalid pagination parameters: page number 1, page size 501`},
		{"page=1&page_size=0", "", `invalid_pagination_parameters: Invalid pagination parameters: page number 1, page size 0`},
		{"page=x", "", `bad_request: Pagination parameters are invalid`},
		{"page=1&page_size=x", "", `bad_request: Pagination parameters are invalid`},
		{"page=1&name=(&use_regex=true", "", `bad_request: Pagination parameters are invalid`},
	}
	for _, c := range cases {
		q, _ := url.ParseQuery(c.query)
		p, err := pagingOf(q)
		var out any
		if err == nil {
			out, err = list(items(), p, itemLister, same)
		}
		if err != nil {
			var re *reasonError
			if !errors.As(err, &re) {
				t.Errorf("%s: %v", c.query, err)
				continue
			}
			kind := re.name
			if kind == "" {
				kind = "bad_request"
			}
			if got := kind + ": " + re.reason; got != c.err {
				t.Errorf("%s: error %q, want %q", c.query, got, c.err)
			}
			continue
		}
		if c.err != "" {
			t.Errorf("%s: no error, want %q", c.query, c.err)
			continue
		}
		if got := render(t, out); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.query, got, c.want)
		}
	}
}

// render writes a listing with each item as its name.
func render(t *testing.T, out any) string {
	names := func(is []item) string {
		var n []string
		for _, i := range is {
			n = append(n, i.Name)
		}
		return strings.Join(n, ",")
	}
	switch o := out.(type) {
	case []item:
		return names(o)
	case pageAnswer[item]:
		items := o.Items
		o.Items = nil
		raw, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Replace(string(raw), `"items":null`, `"items":`+names(items), 1)
	}
	t.Fatalf("listing of type %T", out)
	return ""
}
