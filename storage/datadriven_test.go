package storage

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/warrenmq/warren/internal/datadriven"
)

// TestDataDriven runs the scripts in testdata/: each file starts with a
// fresh in-memory store (opened, not recovered). Commands:
//
//	txn [nondurable]   one Txn of the operations on the following lines
//	dump               every non-system key (Store.Dump)
//	scan q= [p=] [from=] [limit=]
//	levels q=
//	held
//	refs               the in-memory reference counts
//	recover [keep=1,2] Recover keeping those queue ids
//	reopen             Close and Open again (not recovered)
//
// Txn operations:
//
//	put-message id= [refs=] [body=] [exchange=] [rk=]
//	put q= [p=] s= [persistent] [delivered] [deliveries=] [expires=] [msg=] [body=] [exchange=] [rk=] [spill=seg,off,len]
//	update (as put)
//	delete q= [p=] s= [msg=]
//	delete-queue q=
//	release msg=
//	put-held due= seq= rec=
//	delete-held due= seq=
func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/*.dd")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, fs := openMem(t, nil)
			defer func() { s.Close() }()
			datadriven.Run(t, f, func(c *datadriven.Case) string {
				switch c.Cmd {
				case "txn":
					txn := s.Begin()
					for _, l := range c.Input {
						ddOp(t, txn, l)
					}
					ch := make(chan error, 1)
					txn.Commit(!c.Args.Has("nondurable"), func(err error) { ch <- err })
					if err := <-ch; err != nil {
						return "error: " + err.Error()
					}
					return "ok"
				case "dump":
					var b strings.Builder
					if err := s.Dump(&b); err != nil {
						return "error: " + err.Error()
					}
					var out []string
					for _, l := range strings.Split(b.String(), "\n") {
						if l != "" && !strings.HasPrefix(l, "system ") {
							out = append(out, l)
						}
					}
					if len(out) == 0 {
						return "(empty)"
					}
					return strings.Join(out, "\n")
				case "scan":
					var b strings.Builder
					err := s.ScanQueue(c.Args.U64(t, "q", 0), uint8(c.Args.U64(t, "p", 0)), c.Args.U64(t, "from", 0),
						int(c.Args.U64(t, "limit", 0)), func(seq uint64, e *Entry) bool {
							fmt.Fprintf(&b, "%d: %s\n", seq, formatEntry(e))
							return true
						})
					if err != nil {
						return "error: " + err.Error()
					}
					if b.Len() == 0 {
						return "(empty)"
					}
					return b.String()
				case "levels":
					levels, err := s.QueueLevels(c.Args.U64(t, "q", 0))
					if err != nil {
						return "error: " + err.Error()
					}
					return formatLevels(levels)
				case "held":
					var b strings.Builder
					err := s.ScanHeld(func(due int64, seq uint64, rec []byte) bool {
						fmt.Fprintf(&b, "due=%d seq=%d rec=%s\n", due, seq, rec)
						return true
					})
					if err != nil {
						return "error: " + err.Error()
					}
					if b.Len() == 0 {
						return "(empty)"
					}
					return b.String()
				case "refs":
					s.c.mu.Lock()
					var lines []string
					for id, r := range s.c.refs {
						lines = append(lines, fmt.Sprintf("message %d: count=%d promised=%d", id, r.count, r.promised))
					}
					s.c.mu.Unlock()
					if len(lines) == 0 {
						return "(none)"
					}
					slices.Sort(lines)
					return strings.Join(lines, "\n")
				case "recover":
					keep := map[uint64]bool{}
					if v := c.Args["keep"]; v != "" {
						for _, f := range strings.Split(v, ",") {
							n, _ := strconv.ParseUint(f, 10, 64)
							keep[n] = true
						}
					}
					st, err := s.Recover(keep)
					if err != nil {
						return "error: " + err.Error()
					}
					out := fmt.Sprintf("entries=%d bytes=%d transient=%d unknown-queues=%d messages=%d unreferenced=%d missing=%d held=%d",
						st.Entries, st.Bytes, st.Transient, st.UnknownQueues, st.Messages, st.Unreferenced, st.MissingMessages, st.Held)
					qids := make([]uint64, 0, len(st.Queues))
					for q := range st.Queues {
						qids = append(qids, q)
					}
					slices.Sort(qids)
					for _, q := range qids {
						out += fmt.Sprintf("\nqueue %d: %s", q, strings.ReplaceAll(formatLevels(st.Queues[q]), "\n", "; "))
					}
					return out
				case "reopen":
					if err := s.Close(); err != nil {
						return "error: " + err.Error()
					}
					s, _ = openMem(t, fs)
					return "ok"
				}
				t.Fatalf("line %d: unknown command %q", c.Line, c.Cmd)
				return ""
			})
		})
	}
}

func formatLevels(levels []Level) string {
	if len(levels) == 0 {
		return "(empty)"
	}
	var out []string
	for _, l := range levels {
		out = append(out, fmt.Sprintf("prio %d: count=%d bytes=%d seqs=%d..%d", l.Prio, l.Count, l.Bytes, l.FirstSeq, l.LastSeq))
	}
	return strings.Join(out, "\n")
}

// ddOp applies one Txn operation line.
func ddOp(t *testing.T, txn *Txn, line string) {
	f := strings.Fields(line)
	a := datadriven.ParseArgs(f[1:])
	q, p, seq := a.U64(t, "q", 0), uint8(a.U64(t, "p", 0)), a.U64(t, "s", 0)
	msg := func() *Message {
		return &Message{Exchange: a["exchange"], RoutingKey: a["rk"], Flags: uint16(a.U64(t, "flags", 0)), Body: []byte(a["body"])}
	}
	entry := func() *Entry {
		e := &Entry{
			Persistent: a.Has("persistent"),
			Delivered:  a.Has("delivered"),
			Deliveries: uint32(a.U64(t, "deliveries", 0)),
			ExpiresAt:  a.I64(t, "expires", 0),
			MsgID:      a.U64(t, "msg", 0),
		}
		if e.MsgID == 0 || a.Has("body") {
			e.Msg = msg()
		}
		if a.Has("spill") {
			var r SpillRef
			if _, err := fmt.Sscanf(a["spill"], "%d,%d,%d", &r.Seg, &r.Off, &r.Len); err != nil {
				t.Fatalf("spill=%s: want seg,off,len", a["spill"])
			}
			e.Spill = r
		}
		return e
	}
	switch f[0] {
	case "put-message":
		txn.PutMessage(a.U64(t, "id", 0), msg(), int(a.U64(t, "refs", 0)))
	case "put":
		txn.PutEntry(q, p, seq, entry())
	case "update":
		txn.UpdateEntry(q, p, seq, entry())
	case "mark":
		txn.MarkDelivered(q, p, seq, uint32(a.U64(t, "deliveries", 1)))
	case "delete":
		txn.DeleteEntry(q, p, seq, Deleted{MsgID: a.U64(t, "msg", 0), Marked: a.Has("marked")})
	case "delete-queue":
		txn.DeleteQueue(q)
	case "release":
		txn.ReleaseRef(a.U64(t, "msg", 0))
	case "put-held":
		txn.PutHeld(a.I64(t, "due", 0), a.U64(t, "seq", 0), []byte(a["rec"]))
	case "delete-held":
		txn.DeleteHeld(a.I64(t, "due", 0), a.U64(t, "seq", 0))
	default:
		t.Fatalf("unknown txn operation %q", line)
	}
}
