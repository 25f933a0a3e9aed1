package streamproto

import (
	"strings"

	streams "github.com/warrenmq/warren/core/stream"
)

// filter is a subscription's stream filtering, as RabbitMQ 3.13 has it:
// the subscription properties filter.<n> name the filter values wanted,
// and match-unfiltered=true asks for messages without a value as well.
// RabbitMQ skips the stored chunks whose Bloom filter has none of the
// values; Warren skips the chunks it builds (a round of reads) in which
// no message matches, exactly rather than by a Bloom filter. Either way
// a chunk is sent whole or not at all, so its offsets stay contiguous,
// and the client filters the messages of a chunk sent (its post-filter).
type filter struct{ streams.Filter }

// filterOf is the filter Subscribe's properties ask for, nil for none.
func filterOf(props map[string]string) *filter {
	var f *filter
	for k, v := range props {
		if strings.HasPrefix(k, "filter.") {
			if f == nil {
				f = &filter{streams.Filter{Values: map[string]bool{}}}
			}
			f.Values[v] = true
		}
	}
	if f != nil {
		f.MatchUnfiltered = props["match-unfiltered"] == "true"
	}
	return f
}

// wants reports whether a chunk of records is to be sent: one of them is
// a message the filter wants.
func (f *filter) wants(records []record) bool {
	for _, r := range records {
		if f.Wants(r.m) {
			return true
		}
	}
	return false
}
