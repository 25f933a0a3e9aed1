package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rs/zerolog"
)

// The small records the cluster layer writes itself: a member (in a
// configuration change's context), a snapshot's envelope, a join request.
// Each is a sequence of uvarints and length-prefixed strings.

var errShort = errors.New("cluster: truncated record")

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errShort
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func appendBytes(b []byte, s []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendMember(b []byte, m Member) []byte {
	b = binary.AppendUvarint(b, m.ID)
	b = appendBytes(b, []byte(m.Name))
	return appendBytes(b, []byte(m.Addr))
}

func (r *reader) member() Member {
	return Member{ID: r.uvarint(), Name: string(r.bytes()), Addr: string(r.bytes())}
}

// encodeMember is a configuration change's context: who proposed it (to
// answer them), and the member it adds or removes.
func encodeMember(proposer, seq uint64, m Member) []byte {
	b := binary.AppendUvarint(nil, proposer)
	b = binary.AppendUvarint(b, seq)
	return appendMember(b, m)
}

func decodeMember(b []byte) (proposer, seq uint64, m Member, err error) {
	r := reader{b: b}
	proposer, seq, m = r.uvarint(), r.uvarint(), r.member()
	return proposer, seq, m, r.err
}

// encodeSnapshot wraps the state machine's snapshot with the member table,
// which Raft's ConfState (ids only) cannot give back.
func encodeSnapshot(members []Member, state []byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(members)))
	for _, m := range members {
		b = appendMember(b, m)
	}
	return append(b, state...)
}

func decodeSnapshot(b []byte) ([]Member, []byte, error) {
	r := reader{b: b}
	n := r.uvarint()
	if n > uint64(len(b)) {
		return nil, nil, errShort
	}
	members := make([]Member, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		members = append(members, r.member())
	}
	if r.err != nil {
		return nil, nil, fmt.Errorf("cluster: snapshot envelope: %w", r.err)
	}
	return members, r.b, nil
}

// joinRequest asks a member to add (or remove) a node.
type joinRequest struct {
	id         uint64
	name, addr string
	leave      bool // sent as its own frame type
}

func (j joinRequest) marshal() []byte {
	return appendMember(nil, Member{ID: j.id, Name: j.name, Addr: j.addr})
}

func (j *joinRequest) unmarshal(b []byte) error {
	r := reader{b: b}
	m := r.member()
	j.id, j.name, j.addr = m.ID, m.Name, m.Addr
	return r.err
}

// raftLogger sends etcd raft's log lines to zerolog; its routine chatter
// (elections, campaigns) is debug, except what needs an operator.
type raftLogger struct{ log zerolog.Logger }

func (l raftLogger) Debug(v ...any)                 { l.log.Debug().Msg(fmt.Sprint(v...)) }
func (l raftLogger) Debugf(format string, v ...any) { l.log.Debug().Msgf(format, v...) }
func (l raftLogger) Info(v ...any)                  { l.log.Debug().Msg(fmt.Sprint(v...)) }
func (l raftLogger) Infof(format string, v ...any)  { l.log.Debug().Msgf(format, v...) }
func (l raftLogger) Warning(v ...any)               { l.log.Warn().Msg(fmt.Sprint(v...)) }
func (l raftLogger) Warningf(format string, v ...any) {
	l.log.Warn().Msgf(format, v...)
}
func (l raftLogger) Error(v ...any)                 { l.log.Error().Msg(fmt.Sprint(v...)) }
func (l raftLogger) Errorf(format string, v ...any) { l.log.Error().Msgf(format, v...) }
func (l raftLogger) Fatal(v ...any)                 { l.log.Fatal().Msg(fmt.Sprint(v...)) }
func (l raftLogger) Fatalf(format string, v ...any) { l.log.Fatal().Msgf(format, v...) }
func (l raftLogger) Panic(v ...any)                 { panic(fmt.Sprint(v...)) }
func (l raftLogger) Panicf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
