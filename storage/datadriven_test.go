package storage

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the scripts in testdata/ with
// github.com/cockroachdb/datadriven (-rewrite rewrites their expected
// output): each file starts with a fresh in-memory store (opened, not
// recovered). Commands:
//
//	txn [nondurable]       one Txn of the operations on the following lines
//	dump                   every non-system key (Store.Dump)
//	scan q= [p=] [from=] [limit=]
//	levels q=
//	held
//	refs                   the in-memory reference counts
//	recover [keep=(1, 2)]  Recover keeping those queue ids
//	reopen                 Close and Open again (not recovered)
//
// Txn operations, one a line, written as command lines are:
//
//	put-message id= [refs=] [body=] [exchange=] [rk=]
//	put q= [p=] s= [persistent] [delivered] [deliveries=] [expires=] [msg=] [body=] [exchange=] [rk=] [spill=(seg, off, len)]
//	update (as put)
//	mark q= [p=] s= [deliveries=]
//	delete q= [p=] s= [msg=] [marked]
//	delete-queue q=
//	release msg=
//	put-held due= seq= rec=
//	delete-held due= seq=
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s, fs := openMem(t, nil)
		defer func() { s.Close() }()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "txn":
				txn := s.Begin()
				for _, l := range strings.Split(d.Input, "\n") {
					if strings.TrimSpace(l) != "" {
						ddOp(t, d, txn, l)
					}
				}
				ch := make(chan error, 1)
				txn.Commit(!d.HasArg("nondurable"), func(err error) { ch <- err })
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
				err := s.ScanQueue(argOr(t, d, "q", uint64(0)), uint8(argOr(t, d, "p", uint64(0))), argOr(t, d, "from", uint64(0)),
					argOr(t, d, "limit", 0), func(seq uint64, e *Entry) bool {
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
				levels, err := s.QueueLevels(argOr(t, d, "q", uint64(0)))
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
				for _, q := range argOr(t, d, "keep", []uint64(nil)) {
					keep[q] = true
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
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

// argOr returns the value of d's argument key scanned into a T, or def
// when d has no such argument.
func argOr[T any](t testing.TB, d *datadriven.TestData, key string, def T) T {
	t.Helper()
	d.MaybeScanArgs(t, key, &def)
	return def
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

// ddOp applies one Txn operation line of d's input; the line is parsed
// as a command line is.
func ddOp(t *testing.T, d *datadriven.TestData, txn *Txn, line string) {
	t.Helper()
	cmd, args, err := datadriven.ParseLine(line)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	op := &datadriven.TestData{Pos: d.Pos, Cmd: cmd, CmdArgs: args}
	u64 := func(key string) uint64 { return argOr(t, op, key, uint64(0)) }
	q, p, seq := u64("q"), uint8(u64("p")), u64("s")
	msg := func() *Message {
		return &Message{Exchange: argOr(t, op, "exchange", ""), RoutingKey: argOr(t, op, "rk", ""),
			Flags: uint16(u64("flags")), Body: []byte(argOr(t, op, "body", ""))}
	}
	entry := func() *Entry {
		e := &Entry{
			Persistent: op.HasArg("persistent"),
			Delivered:  op.HasArg("delivered"),
			Deliveries: argOr(t, op, "deliveries", uint32(0)),
			ExpiresAt:  argOr(t, op, "expires", int64(0)),
			MsgID:      u64("msg"),
		}
		if e.MsgID == 0 || op.HasArg("body") {
			e.Msg = msg()
		}
		if op.HasArg("spill") {
			op.ScanArgs(t, "spill", &e.Spill.Seg, &e.Spill.Off, &e.Spill.Len)
		}
		return e
	}
	switch op.Cmd {
	case "put-message":
		txn.PutMessage(u64("id"), msg(), argOr(t, op, "refs", 0))
	case "put":
		txn.PutEntry(q, p, seq, entry())
	case "update":
		txn.UpdateEntry(q, p, seq, entry())
	case "mark":
		txn.MarkDelivered(q, p, seq, argOr(t, op, "deliveries", uint32(1)))
	case "delete":
		txn.DeleteEntry(q, p, seq, Deleted{MsgID: u64("msg"), Marked: op.HasArg("marked")})
	case "delete-queue":
		txn.DeleteQueue(q)
	case "release":
		txn.ReleaseRef(u64("msg"))
	case "put-held":
		txn.PutHeld(argOr(t, op, "due", int64(0)), u64("seq"), []byte(argOr(t, op, "rec", "")))
	case "delete-held":
		txn.DeleteHeld(argOr(t, op, "due", int64(0)), u64("seq"))
	default:
		d.Fatalf(t, "unknown txn operation %q", line)
	}
}
