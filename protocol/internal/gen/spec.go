package main

import (
	"encoding/xml"
	"fmt"
	"strconv"
	"strings"
)

// The XML as it is written. Only the attributes the codec needs are read;
// asserts, chassis and documentation are ignored.
type xmlSpec struct {
	Constants []xmlConstant `xml:"constant"`
	Domains   []xmlDomain   `xml:"domain"`
	Classes   []xmlClass    `xml:"class"`
}

type xmlConstant struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
	Class string `xml:"class,attr"`
}

type xmlDomain struct {
	Name string `xml:"name,attr"`
	Type string `xml:"type,attr"`
}

type xmlClass struct {
	Name    string      `xml:"name,attr"`
	Index   string      `xml:"index,attr"`
	Fields  []xmlField  `xml:"field"`
	Methods []xmlMethod `xml:"method"`
}

type xmlMethod struct {
	Name        string        `xml:"name,attr"`
	Index       string        `xml:"index,attr"`
	Synchronous string        `xml:"synchronous,attr"`
	Content     string        `xml:"content,attr"`
	Deprecated  string        `xml:"deprecated,attr"`
	Responses   []xmlResponse `xml:"response"`
	Fields      []xmlField    `xml:"field"`
}

type xmlResponse struct {
	Name string `xml:"name,attr"`
}

type xmlField struct {
	Name     string `xml:"name,attr"`
	Domain   string `xml:"domain,attr"`
	Type     string `xml:"type,attr"`
	Reserved string `xml:"reserved,attr"`
}

// The model the emitter works from: names resolved, domains reduced to
// their wire types.
type spec struct {
	Constants []constant
	Classes   []class
}

type constant struct {
	XMLName string
	GoName  string
	Value   int
	Hard    bool // class="hard-error"
	Reply   bool // a reply code rather than a frame constant
}

type class struct {
	XMLName    string
	GoName     string
	ID         int
	Properties []field // content properties (class basic only)
	Methods    []method
}

type method struct {
	Class       *class
	XMLName     string
	GoName      string // Class+Method, e.g. BasicPublish
	ID          int
	Synchronous bool
	Content     bool
	Deprecated  bool
	Responses   []string
	Fields      []field
}

// FullName is the dotted name RabbitMQ logs use, e.g. "basic.publish".
func (m *method) FullName() string { return m.Class.XMLName + "." + m.XMLName }

type field struct {
	XMLName  string
	GoName   string
	Domain   string // as written, for comments
	Type     string // wire type: bit, octet, short, long, longlong, shortstr, longstr, table, timestamp
	Reserved bool
}

var wireTypes = map[string]bool{
	"bit": true, "octet": true, "short": true, "long": true, "longlong": true,
	"shortstr": true, "longstr": true, "table": true, "timestamp": true,
}

func parseSpec(b []byte) (*spec, error) {
	var x xmlSpec
	if err := xml.Unmarshal(b, &x); err != nil {
		return nil, fmt.Errorf("parse spec: %w", err)
	}
	domains := map[string]string{}
	for _, d := range x.Domains {
		domains[d.Name] = d.Type
	}
	resolve := func(where string, f xmlField) (field, error) {
		t, d := f.Type, f.Domain
		if t == "" {
			t = domains[d]
		}
		if !wireTypes[t] {
			return field{}, fmt.Errorf("%s: field %q: no wire type (domain %q)", where, f.Name, d)
		}
		if d == "" {
			d = t
		}
		return field{XMLName: f.Name, GoName: goName(f.Name), Domain: d, Type: t, Reserved: f.Reserved == "1"}, nil
	}

	s := &spec{}
	for _, c := range x.Constants {
		v, err := strconv.Atoi(c.Value)
		if err != nil {
			return nil, fmt.Errorf("constant %s: %w", c.Name, err)
		}
		s.Constants = append(s.Constants, constant{
			XMLName: c.Name,
			GoName:  goName(c.Name),
			Value:   v,
			Hard:    c.Class == "hard-error",
			// Reply codes carry a soft/hard class, except success.
			Reply: c.Class != "" || c.Name == "reply-success",
		})
	}
	s.Classes = make([]class, len(x.Classes))
	for i, xc := range x.Classes {
		c := &s.Classes[i]
		id, err := strconv.Atoi(xc.Index)
		if err != nil {
			return nil, fmt.Errorf("class %s: %w", xc.Name, err)
		}
		*c = class{XMLName: xc.Name, GoName: goName(xc.Name), ID: id}
		for _, xf := range xc.Fields {
			f, err := resolve(xc.Name, xf)
			if err != nil {
				return nil, err
			}
			c.Properties = append(c.Properties, f)
		}
		for _, xm := range xc.Methods {
			mid, err := strconv.Atoi(xm.Index)
			if err != nil {
				return nil, fmt.Errorf("method %s.%s: %w", xc.Name, xm.Name, err)
			}
			m := method{
				Class:       c,
				XMLName:     xm.Name,
				GoName:      c.GoName + goName(xm.Name),
				ID:          mid,
				Synchronous: xm.Synchronous == "1",
				Content:     xm.Content == "1",
				Deprecated:  xm.Deprecated == "1",
			}
			for _, r := range xm.Responses {
				m.Responses = append(m.Responses, xc.Name+"."+r.Name)
			}
			for _, xf := range xm.Fields {
				f, err := resolve(m.FullName(), xf)
				if err != nil {
					return nil, err
				}
				if n, ok := fieldRenames[m.FullName()+"/"+f.XMLName]; ok {
					f.GoName = n
				}
				m.Fields = append(m.Fields, f)
			}
			c.Methods = append(c.Methods, m)
		}
	}
	return s, nil
}

// fieldRenames holds the few field names the plain rule cannot produce:
//   - connection.close and channel.close carry the id of the failing method
//     in class-id and method-id, which would collide with the ClassID() and
//     MethodID() methods every method struct has;
//   - confirm.select spells its flag "nowait" where every other method says
//     "no-wait"; one Go name for one meaning.
var fieldRenames = map[string]string{
	"connection.close/class-id":  "FailingClassID",
	"connection.close/method-id": "FailingMethodID",
	"channel.close/class-id":     "FailingClassID",
	"channel.close/method-id":    "FailingMethodID",
	"confirm.select/nowait":      "NoWait",
}

// goName turns an XML name into Go CamelCase: "routing-key" -> "RoutingKey",
// "reserved-1" -> "Reserved1", "class-id" -> "ClassID".
func goName(s string) string {
	var b strings.Builder
	for _, part := range strings.Split(s, "-") {
		if part == "" {
			continue
		}
		if part == "id" {
			b.WriteString("ID")
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]))
		b.WriteString(part[1:])
	}
	return b.String()
}

// lowerFirst makes an unexported field name from a Go name.
func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }
