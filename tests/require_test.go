package tests

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// skipFor skips t for want of tool (chromium, pika, amqplib,
// rabbitmqadmin, tmpfs, promtool), unless the run requires that tool:
// WARREN_REQUIRE lists, comma-separated, what .ci/run found or installed
// on its machine, and there a test that cannot run for want of one fails
// rather than skipping unnoticed (as WARREN_REQUIRE_SDK_TOOLCHAINS does
// for the plugin SDKs' toolchains).
func skipFor(t testing.TB, tool, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if required(tool) {
		t.Fatalf("%s (WARREN_REQUIRE names %s)", why, tool)
	}
	t.Skip(why)
}

// required says whether WARREN_REQUIRE names tool.
func required(tool string) bool {
	return slices.Contains(strings.Split(os.Getenv("WARREN_REQUIRE"), ","), tool)
}
