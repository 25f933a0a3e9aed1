//go:build !warren_unsafe_settle

package quorum

import "time"

// settleHold is 0 in every build but the one made to check the crash
// test's ack check (settle_unsafe.go).
const settleHold time.Duration = 0
