package testwait

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestHolds: a condition that comes true is seen at once; one that never
// does is given up on after within, not before.
func TestHolds(t *testing.T) {
	var n atomic.Int32
	if !Holds(time.Second, func() bool { return n.Add(1) >= 3 }) || n.Load() != 3 {
		t.Fatalf("a condition true on the third look: %d looks", n.Load())
	}
	start := time.Now()
	if Holds(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition never true held")
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("gave up after %s, before 20ms", d)
	}
}
