//go:build !warren_unsafe_confirm

package quorum

// confirmEarly is false in every build but the one made to check the
// loss checker (confirm_unsafe.go).
const confirmEarly = false
