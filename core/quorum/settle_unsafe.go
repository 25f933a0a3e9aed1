//go:build warren_unsafe_settle

package quorum

import "time"

// A build with the tag warren_unsafe_settle holds a quorum queue's
// settlements back for seconds before it proposes them: acks broken on
// purpose, so that the kill -9 test can show its check reporting acked
// messages that come back (TestKillCheckSeesLossesAndAcksBack). Never
// ship such a build.
const settleHold = 3 * time.Second
