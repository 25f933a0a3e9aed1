package exchange

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/protocol"
)

// TestRouting runs testdata/routing: each case is commands, a "----" line,
// then the expected output, and a blank line. Commands:
//
//	new TYPE                     a fresh exchange of a built-in type
//	bind DEST KEY [ARG...]       bind queue DEST with a key ("-" for empty)
//	unbind DEST KEY [ARG...]
//	route KEY [HEADER...]        prints the destinations matched, sorted
//
// ARG and HEADER are name=value with typed values: s:text (the default),
// i:32-bit int, l:64-bit int, b:8-bit int, d:double, f:float, t:bool, void.
func TestRouting(t *testing.T) {
	f, err := os.Open("testdata/routing")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	line := 0
	var router Router
	var bindings []*Binding
	var cmds []string
	var want []string
	inExpect := false
	run := func() {
		var got []string
		for _, cmd := range cmds {
			out, err := exec(t, &router, &bindings, cmd)
			if err != nil {
				got = append(got, "error: "+err.Error())
			} else if out != "" {
				got = append(got, out)
			}
		}
		if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
			t.Errorf("testdata/routing:%d:\n%s\ngot:\n%s\nwant:\n%s", line, strings.Join(cmds, "\n"), g, w)
		}
		cmds, want, inExpect = nil, nil, false
	}
	for sc.Scan() {
		line++
		text := sc.Text()
		switch {
		case strings.HasPrefix(text, "#"):
		case text == "----":
			inExpect = true
		case text == "":
			if inExpect {
				run()
			}
		case inExpect:
			want = append(want, text)
		default:
			cmds = append(cmds, text)
		}
	}
	if inExpect {
		run()
	}
}

func exec(t *testing.T, router *Router, bindings *[]*Binding, cmd string) (string, error) {
	fields := strings.Fields(cmd)
	switch fields[0] {
	case "new":
		r := NewRegistry()
		typ, ok := r.Lookup(fields[1])
		if !ok {
			return "", fmt.Errorf("no type %s", fields[1])
		}
		rt, err := typ.Create(Definition{Name: "x", Type: fields[1]})
		*router, *bindings = rt, nil
		return "", err
	case "bind":
		b := &Binding{Destination: Destination{Name: fields[1]}, Key: key(fields[2]), Args: table(t, fields[3:])}
		if err := (*router).ValidateBinding(b); err != nil {
			return "", err
		}
		*bindings = append(*bindings, b)
		return "", (*router).AddBinding(b)
	case "unbind":
		for i, b := range *bindings {
			if b.Destination.Name == fields[1] && b.Key == key(fields[2]) {
				*bindings = append((*bindings)[:i], (*bindings)[i+1:]...)
				return "", (*router).RemoveBindings([]*Binding{b})
			}
		}
		return "", fmt.Errorf("no such binding")
	case "route":
		m := newMessage(t, key(fields[1]), table(t, fields[2:]))
		var res Result
		if err := (*router).Route(m, &res); err != nil {
			return "", err
		}
		seen := map[string]bool{}
		var names []string
		for _, b := range res.Bindings {
			if !seen[b.Destination.Name] {
				seen[b.Destination.Name] = true
				names = append(names, b.Destination.Name)
			}
		}
		sort.Strings(names)
		if len(names) == 0 {
			return "(none)", nil
		}
		return strings.Join(names, " "), nil
	}
	return "", fmt.Errorf("unknown command %q", fields[0])
}

func key(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

func table(t *testing.T, args []string) protocol.Table {
	if len(args) == 0 {
		return nil
	}
	tab := protocol.Table{}
	for _, a := range args {
		name, val, _ := strings.Cut(a, "=")
		tab[name] = value(t, val)
	}
	return tab
}

func value(t *testing.T, v string) any {
	if v == "void" {
		return nil
	}
	kind, text, typed := strings.Cut(v, ":")
	if !typed {
		return v
	}
	num := func(bits int) int64 {
		n, err := strconv.ParseInt(text, 10, bits)
		if err != nil {
			t.Fatalf("bad number %q", v)
		}
		return n
	}
	switch kind {
	case "s":
		return text
	case "i":
		return int32(num(32))
	case "l":
		return num(64)
	case "b":
		return int8(num(8))
	case "d", "f":
		x, err := strconv.ParseFloat(text, 64)
		if err != nil {
			t.Fatalf("bad float %q", v)
		}
		if kind == "f" {
			return float32(x)
		}
		return x
	case "t":
		return text == "true"
	}
	return v
}

// newMessage builds a message as a publisher would send it.
func newMessage(t *testing.T, routingKey string, headers protocol.Table) *message.Message {
	p := protocol.Properties{}
	if headers != nil {
		p.Flags |= protocol.FlagHeaders
		p.Headers = headers
	}
	raw, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := message.New("x", routingKey, p.Flags, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
