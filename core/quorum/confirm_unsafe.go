//go:build warren_unsafe_confirm

package quorum

// A build with the tag warren_unsafe_confirm confirms a publish as soon as
// its entry is proposed, before a majority has it: replication broken on
// purpose, so that a test can show tests/losscheck reporting the losses
// that follow (TestLossCheckSeesEarlyConfirms). Never ship such a build.
const confirmEarly = true
