//go:build !wasip1

package sdk

import (
	"fmt"
	"os"
	"time"
)

// Stand-ins for the host functions when a plugin's code runs natively, in
// its own unit tests: logs go to stderr, clocks are the process's, and the
// settings are whatever SetSettings gave.

var started = time.Now()

func hostLog(level Level, msg string) {
	fmt.Fprintf(os.Stderr, "plugin log [%d]: %s\n", level, msg)
}

func hostMonotonic() int64 { return int64(time.Since(started)) }

func hostWall() int64 { return time.Now().UnixNano() }

var nativeSettings []byte

// nativeTypes are the exchange types TypeExists knows natively: the
// broker's built-in ones, and what SetTypes adds.
var nativeTypes = map[string]bool{"direct": true, "fanout": true, "topic": true, "headers": true}

func hostTypeExists(name string) bool { return nativeTypes[name] }

// SetTypes sets, for native tests, whether TypeExists(name) reports each
// name as existing. It exists only outside GOOS=wasip1.
func SetTypes(exists map[string]bool) {
	for name, ok := range exists {
		if ok {
			nativeTypes[name] = true
		} else {
			delete(nativeTypes, name)
		}
	}
}

func hostConfig() []byte {
	if nativeSettings == nil {
		return []byte{0, 0, 0, 0}
	}
	return nativeSettings
}

// SetSettings gives native tests the settings Settings returns (nil: none).
// It exists only outside GOOS=wasip1, where the broker supplies them.
func SetSettings(m map[string]any) error {
	if m == nil {
		nativeSettings, settingsRead = nil, false
		return nil
	}
	b, err := appendTable(nil, m)
	if err != nil {
		return err
	}
	nativeSettings, settingsRead = b, false
	return nil
}
