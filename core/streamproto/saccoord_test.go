package streamproto

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestSACCoordinator runs testdata/sac.dd against the coordinator's rules
// (saccoord.go). Members are named by node and connection (run 1,
// subscription 1); groups by name, on stream "s". Commands:
//
//	register group= node= conn= [partition=]
//	leave group= node= conn=
//	stepped-down group= node= conn=
//	sync node=             each input line: group= conn= [partition=] [active] [stepping-down]
//	drop-node node=
//	groups                 every group, its members in order with their state
//
// Each command but groups prints the updates it calls for, in order.
func TestSACCoordinator(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var st sacState
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			key := func(d *datadriven.TestData) sacKey {
				var name string
				d.ScanArgs(t, "group", &name)
				return sacKey{VHost: "/", Stream: "s", Name: name}
			}
			member := func(d *datadriven.TestData, node string) sacMember {
				if node == "" {
					d.ScanArgs(t, "node", &node)
				}
				var conn uint64
				d.ScanArgs(t, "conn", &conn)
				return sacMember{Node: node, Run: 1, Conn: conn, Sub: 1}
			}
			partition := func(d *datadriven.TestData) int {
				p := -1
				d.MaybeScanArgs(t, "partition", &p)
				return p
			}
			switch d.Cmd {
			case "register":
				return formatUpdates(st.register(key(d), member(d, ""), partition(d)))
			case "leave":
				return formatUpdates(st.leave(key(d), member(d, "")))
			case "stepped-down":
				return formatUpdates(st.steppedDown(key(d), member(d, "")))
			case "sync":
				var node string
				d.ScanArgs(t, "node", &node)
				reports := map[sacKey][]sacReport{}
				for _, line := range strings.Split(d.Input, "\n") {
					if strings.TrimSpace(line) == "" {
						continue
					}
					cmd, args, err := datadriven.ParseLine("report " + line)
					if err != nil {
						d.Fatalf(t, "%v", err)
					}
					op := &datadriven.TestData{Pos: d.Pos, Cmd: cmd, CmdArgs: args}
					k := key(op)
					reports[k] = append(reports[k], sacReport{Member: member(op, node), Partition: partition(op),
						Active: op.HasArg("active"), SteppingDown: op.HasArg("stepping-down")})
				}
				return formatUpdates(st.sync(node, reports))
			case "drop-node":
				var node string
				d.ScanArgs(t, "node", &node)
				return formatUpdates(st.dropNode(node))
			case "groups":
				var b strings.Builder
				for _, k := range sortedKeys(st.groups) {
					grp := st.groups[k]
					fmt.Fprintf(&b, "%s (partition %d):", k.Name, grp.partition)
					for _, s := range grp.members {
						state := "waiting"
						switch {
						case s.active:
							state = "active"
						case s.steppingDown:
							state = "stepping-down"
						}
						fmt.Fprintf(&b, " %s/%d=%s", s.m.Node, s.m.Conn, state)
					}
					b.WriteString("\n")
				}
				if b.Len() == 0 {
					return "(none)"
				}
				return b.String()
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

func formatUpdates(ups []sacUpdate) string {
	if len(ups) == 0 {
		return "(no updates)"
	}
	var out []string
	for _, u := range ups {
		what := "step down"
		if u.Active {
			what = "activate"
		}
		out = append(out, fmt.Sprintf("%s %s/%d", what, u.Member.Node, u.Member.Conn))
	}
	return strings.Join(out, "\n")
}
