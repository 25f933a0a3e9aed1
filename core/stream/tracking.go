package stream

// What a stream tracks by name for the stream protocol, as RabbitMQ's
// streams keep it in the log itself: each deduplicating publisher's last
// sequence, and each consumer's stored offset. It is stored with the
// stream (storage's tracking records), written in the same batch as the
// messages it describes, and in a replicated stream carried by the log
// entries and snapshots, so a restart or a new leader knows it.

// Writer names a deduplicating publisher of a message: the stream
// protocol's publisher reference, and the message's publishing id. The
// zero Writer is a publisher that does not deduplicate.
type Writer struct {
	Name string
	Seq  uint64
}

// resend reports whether w's message is at or below the last sequence
// taken from w.Name; mu is held.
func (s *Stream) resend(w Writer) bool {
	if w.Name == "" {
		return false
	}
	last, ok := s.sequences[w.Name]
	return ok && w.Seq <= last
}

// track records w's sequence as the last taken; mu is held.
func (s *Stream) track(w Writer) {
	if w.Name != "" {
		s.sequences[w.Name] = w.Seq
	}
}

// Sequence is the last sequence the stream took from a deduplicating
// publisher; ok is false when it took none.
func (s *Stream) Sequence(name string) (seq uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq, ok = s.sequences[name]
	return seq, ok
}

// Offset is a consumer's stored offset; ok is false when none is.
func (s *Stream) Offset(name string) (offset uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	offset, ok = s.offsets[name]
	return offset, ok
}

// StoreOffset stores a consumer's offset under its name. It is not
// waited for, as RabbitMQ's store_offset has no answer: a crash may lose
// the last one stored, never corrupt it. done, when set, hears once it
// is written (tests).
func (s *Stream) StoreOffset(name string, offset uint64, done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	s.mu.Lock()
	if err := s.refusing(); err != nil {
		s.mu.Unlock()
		done(err)
		return
	}
	if s.log != nil {
		s.mu.Unlock()
		s.log.Propose(encodeTrackOffset(name, offset), func(_ uint64, err error) { done(err) })
		return
	}
	s.offsets[name] = offset
	tx := s.cfg.Store.Begin()
	tx.PutStreamOffset(s.cfg.ID, name, offset)
	s.mu.Unlock()
	tx.Commit(false, func(err error) {
		s.failIf(err)
		done(err)
	})
}
