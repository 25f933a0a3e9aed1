package admin

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Listings sort and page as RabbitMQ 3.10.8's do (checked against it):
//
//   - Every listing is sorted by name unless ?sort=FIELD asks otherwise
//     (a dotted path into the item, such as message_stats.publish); items
//     with equal keys, or without the field, keep name order.
//     ?sort_reverse=true reverses the whole order.
//   - Without ?page the answer is the bare array, and ?name is ignored.
//   - With ?page=N (1-based) the answer is {filtered_count, item_count,
//     items, page, page_count, page_size, total_count}: ?page_size
//     (default 100, at most 500) items of those whose name contains ?name,
//     case-insensitively, or matches it as a case-insensitive regular
//     expression with ?use_regex=true.
//   - A page or page_size that is not a number, or a bad regular
//     expression, is 400 bad_request "Pagination parameters are invalid";
//     a page below 1 or a page_size outside 1..500 is 400
//     invalid_pagination_parameters; a page past the last one (other than
//     page 1 of nothing) is 400 page_out_of_range.

const (
	defaultPageSize = 100
	maxPageSize     = 500
)

// paging is what a request asks of a listing.
type paging struct {
	paged   bool
	page    int
	size    int
	name    string
	re      *regexp.Regexp // use_regex
	sortKey string
	reverse bool
}

var errPagination = badRequest("Pagination parameters are invalid")

// pagingOf reads a request's sort and pagination parameters.
func pagingOf(q interface{ Get(string) string }) (paging, error) {
	p := paging{sortKey: q.Get("sort"), reverse: q.Get("sort_reverse") == "true", size: defaultPageSize}
	pageS := q.Get("page")
	if pageS == "" {
		return p, nil
	}
	p.paged = true
	var err error
	if p.page, err = strconv.Atoi(pageS); err != nil {
		return p, errPagination
	}
	if s := q.Get("page_size"); s != "" {
		if p.size, err = strconv.Atoi(s); err != nil {
			return p, errPagination
		}
	}
	if p.page < 1 || p.size < 1 || p.size > maxPageSize {
		return p, &reasonError{kind: errBadRequest, name: "invalid_pagination_parameters",
			reason: fmt.Sprintf("Invalid pagination parameters: page number %d, page size %d", p.page, p.size)}
	}
	p.name = q.Get("name")
	if p.name != "" && q.Get("use_regex") == "true" {
		if p.re, err = regexp.Compile("(?i)" + p.name); err != nil {
			return p, errPagination
		}
	}
	return p, nil
}

// matches reports whether a name passes the name filter.
func (p paging) matches(name string) bool {
	switch {
	case p.name == "":
		return true
	case p.re != nil:
		return p.re.MatchString(name)
	}
	return strings.Contains(strings.ToLower(name), strings.ToLower(p.name))
}

// pageAnswer is RabbitMQ's paged listing.
type pageAnswer[T any] struct {
	FilteredCount int `json:"filtered_count"`
	ItemCount     int `json:"item_count"`
	Items         []T `json:"items"`
	Page          int `json:"page"`
	PageCount     int `json:"page_count"`
	PageSize      int `json:"page_size"`
	TotalCount    int `json:"total_count"`
}

// lister describes a listing's rows: each row's name, and its value under
// a sort key. field may answer ok=false for a key it does not know, and
// the rendered item's JSON form is searched instead.
type lister[S any] struct {
	name  func(S) string
	field func(S, string) (any, bool)
}

// same renders a row that is already its own JSON form.
func same[T any](t T) T { return t }

// list sorts, filters and pages rows as p asks, and renders only the rows
// it answers with: a page of 100 out of 10,000 queues renders 100. Rows
// are never moved (a queue's row is large); an index is sorted instead.
func list[S, T any](rows []S, p paging, l lister[S], render func(S) T) (any, error) {
	names := make([]string, len(rows))
	idx := make([]int, len(rows))
	for i, r := range rows {
		names[i], idx[i] = l.name(r), i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return strings.Compare(names[a], names[b]) })
	if p.sortKey != "" && p.sortKey != "name" {
		keys := make([]any, len(rows))
		for i, r := range rows {
			keys[i] = valueOf(l, r, render, p.sortKey)
		}
		slices.SortStableFunc(idx, func(a, b int) int { return compareValues(keys[a], keys[b]) })
	}
	if p.reverse {
		slices.Reverse(idx)
	}
	renderAll := func(is []int) []T {
		out := make([]T, len(is))
		for i, j := range is {
			out[i] = render(rows[j])
		}
		return out
	}
	if !p.paged {
		return renderAll(idx), nil
	}
	filtered := idx
	if p.name != "" {
		filtered = make([]int, 0, len(idx))
		for _, i := range idx {
			if p.matches(names[i]) {
				filtered = append(filtered, i)
			}
		}
	}
	start := (p.page - 1) * p.size
	if p.page > 1 && start >= len(filtered) {
		return nil, &reasonError{kind: errBadRequest, name: "page_out_of_range",
			reason: fmt.Sprintf("Page out of range, page: %d page size: %d, len: %d", p.page, p.size, len(filtered))}
	}
	end := min(start+p.size, len(filtered))
	pageItems := renderAll(filtered[start:end])
	return pageAnswer[T]{
		FilteredCount: len(filtered), ItemCount: len(pageItems), Items: pageItems, Page: p.page,
		PageCount: (len(filtered) + p.size - 1) / p.size, PageSize: p.size, TotalCount: len(rows),
	}, nil
}

// valueOf is a row's value under a dotted sort key, nil when absent.
func valueOf[S, T any](l lister[S], r S, render func(S) T, key string) any {
	if l.field != nil {
		if v, ok := l.field(r, key); ok {
			return v
		}
	}
	raw, err := json.Marshal(render(r))
	if err != nil {
		return nil
	}
	var m any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&m) != nil {
		return nil
	}
	for _, part := range strings.Split(key, ".") {
		obj, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = obj[part]
	}
	return m
}

// compareValues orders sort keys: absent first, then numbers by value,
// booleans false before true, strings bytewise; mixed kinds by kind.
func compareValues(a, b any) int {
	ka, na, sa := classify(a)
	kb, nb, sb := classify(b)
	if ka != kb {
		return cmp.Compare(ka, kb)
	}
	if ka == kindNumber {
		return cmp.Compare(na, nb)
	}
	return strings.Compare(sa, sb)
}

const (
	kindAbsent = iota
	kindNumber
	kindString
	kindOther
)

func classify(v any) (kind int, n float64, s string) {
	switch x := v.(type) {
	case nil:
		return kindAbsent, 0, ""
	case int:
		return kindNumber, float64(x), ""
	case int64:
		return kindNumber, float64(x), ""
	case uint64:
		return kindNumber, float64(x), ""
	case float64:
		return kindNumber, x, ""
	case json.Number:
		f, _ := x.Float64()
		return kindNumber, f, ""
	case bool:
		if x {
			return kindNumber, 1, ""
		}
		return kindNumber, 0, ""
	case string:
		return kindString, 0, x
	}
	return kindOther, 0, fmt.Sprint(v)
}
