package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// listing is a list_* command: where its rows come from, the columns
// rabbitmqctl shows by default, and every column it accepts, each mapped to
// a field of the API's rows (a dotted path into nested objects) where the
// names differ.
type listing struct {
	what     string // "queues", in "Listing queues ..."
	path     func(o *opts) string
	perVHost bool
	defaults []string
	columns  []string
	fields   map[string]string // column → API field path, when not the same
	// augment, when set, adds to the API's rows fields it does not have
	// that a chosen column needs.
	augment func(c *client, cols []string, raw []map[string]any) error
	// keep, when set, says which of the API's rows are listed.
	keep func(row map[string]any) bool
}

// rows fetches the listing and keeps the chosen columns, in order.
func (l listing) rows(c *client, o *opts, cols []string) ([][]any, error) {
	var raw []map[string]any
	if err := c.get(l.path(o), &raw); err != nil {
		return nil, err
	}
	if l.keep != nil {
		raw = slices.DeleteFunc(raw, func(r map[string]any) bool { return !l.keep(r) })
	}
	if l.augment != nil {
		if err := l.augment(c, cols, raw); err != nil {
			return nil, err
		}
	}
	out := make([][]any, len(raw))
	for i, r := range raw {
		row := make([]any, len(cols))
		for j, col := range cols {
			field := col
			if f, ok := l.fields[col]; ok {
				field = f
			}
			row[j] = lookup(r, field)
		}
		out[i] = row
	}
	return out, nil
}

// chosen checks the requested columns (none: the defaults).
func (l listing) chosen(args []string) ([]string, error) {
	if len(args) == 0 {
		return l.defaults, nil
	}
	valid := map[string]bool{}
	for _, c := range l.columns {
		valid[c] = true
	}
	for _, a := range args {
		if !valid[a] {
			return nil, fmt.Errorf("unknown column %q for list_%s; valid columns: %s", a, l.what, strings.Join(l.columns, ", "))
		}
	}
	return args, nil
}

// lookup follows a dotted path ("queue.name") into nested objects.
func lookup(r map[string]any, path string) any {
	var v any = r
	for _, part := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

// output writes rows as rabbitmqctl does: a "Listing ..." line unless
// quiet or silent, then a header line unless silent, then a line per row,
// cells separated by tabs; or, with --formatter json, one JSON array of
// objects with the columns in order.
func output(w io.Writer, o *opts, banner string, cols []string, rows [][]any) error {
	if o.formatter == "json" {
		var b bytes.Buffer
		b.WriteByte('[')
		for i, row := range rows {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('{')
			for j, col := range cols {
				if j > 0 {
					b.WriteByte(',')
				}
				k, _ := json.Marshal(col)
				v, err := json.Marshal(row[j])
				if err != nil {
					return err
				}
				b.Write(k)
				b.WriteByte(':')
				b.Write(v)
			}
			b.WriteByte('}')
		}
		b.WriteString("]\n")
		_, err := w.Write(b.Bytes())
		return err
	}
	if !o.quiet && !o.silent && banner != "" {
		fmt.Fprintln(w, banner)
	}
	if !o.silent {
		fmt.Fprintln(w, strings.Join(cols, "\t"))
	}
	for _, row := range rows {
		cells := make([]string, len(row))
		for i, v := range row {
			cells[i] = cell(v)
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	return nil
}

// cell renders a value for the table formatter: strings bare, numbers
// without exponents, lists comma-joined, objects as JSON.
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
