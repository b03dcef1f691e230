// Package testwait is the one way the module's tests wait: for the state
// they need, looked at every millisecond up to a deadline, never for a time
// guessed to be enough. It is imported by tests only.
package testwait

import (
	"testing"
	"time"
)

// Holds looks at cond every millisecond until it holds (true) or within
// has passed (false): the wait of a fake, which has no test to fail.
func Holds(within time.Duration, cond func() bool) bool {
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

// For waits as Holds does and fails t naming what did not happen once
// within has passed.
func For(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Holds(within, cond) {
		t.Fatalf("%s: not within %s", what, within)
	}
}
