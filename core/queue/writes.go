package queue

// Writes gathers the connections that one goroutine's run of work wrote
// deliveries to, so that goroutine flushes each once when its run ends
// instead of waking each connection's writer per delivery. A connection's
// reader owns one: the publishes it reads in one go are delivered, and
// their consumers' sockets written, before it reads again.
//
// A Writes belongs to one goroutine. A Delivery carries it only for the
// length of a Deliver call; a consumer that keeps a delivery for later must
// not keep its Writes.
type Writes struct {
	pending []Flusher
}

// A Flusher has bytes waiting to be written and writes them when flushed:
// from the flushing goroutine when direct is set (and the socket is free),
// or by handing them to the connection's own writer. A short run writes
// directly, which spares a goroutine handoff; a long one hands over, so
// its writes proceed on another core while the run's goroutine reads on.
type Flusher interface {
	Flush(direct bool)
}

// Add asks w's owner to flush f at the end of its run. The caller makes
// sure f is added once per run (connections keep a flag).
func (w *Writes) Add(f Flusher) { w.pending = append(w.pending, f) }

// Flush flushes everything added since the last Flush.
func (w *Writes) Flush(direct bool) {
	for i, f := range w.pending {
		w.pending[i] = nil
		f.Flush(direct)
	}
	w.pending = w.pending[:0]
}

// Len is how many flushers wait.
func (w *Writes) Len() int { return len(w.pending) }
