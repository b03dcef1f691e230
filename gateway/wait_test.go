package gateway

import (
	"testing"
	"time"
)

// waitFor looks at cond every millisecond until it holds, and fails the
// test naming what did not happen once within has passed: a test waits for
// the state it needs, never for a time it guessed would be enough.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !holdsWithin(within, cond) {
		t.Fatalf("%s: not within %s", what, within)
	}
}

// holdsWithin looks at cond every millisecond until it holds (true) or
// within has passed (false): the wait of a fake, which has no test to fail.
func holdsWithin(within time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
	return true
}
