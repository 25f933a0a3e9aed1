package main

import (
	"regexp"
	"testing"
)

// Every command warrenctl runs is in its usage text, so that none is
// there only for those who read the source.
func TestUsageNamesEveryCommand(t *testing.T) {
	for _, names := range []map[string]bool{keys(commands), keys(listings)} {
		for name := range names {
			if !regexp.MustCompile(`(^|[\s|])` + regexp.QuoteMeta(name) + `($|[\s|])`).MatchString(usage) {
				t.Errorf("usage does not name %s", name)
			}
		}
	}
}

func keys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}
