package plugins

import (
	"testing"
	"time"
)

// Every context handed out has a deadline between timeout and timeout+tick
// from the moment it was asked for, and calls within one tick share one.
func TestDeadlines(t *testing.T) {
	d := newDeadlines(50 * time.Millisecond)
	if d.tick != 5*time.Millisecond {
		t.Fatalf("tick = %v, want 5ms", d.tick)
	}
	first := d.context(time.Now())
	for i := 0; i < 200; i++ {
		before := time.Now()
		ctx := d.context(time.Now())
		after := time.Now()
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatal("no deadline")
		}
		if dl.Sub(after) < d.timeout || dl.Sub(after) > d.timeout+d.tick {
			t.Fatalf("deadline %v after the call (which took %v), want within [%v, %v]", dl.Sub(after), after.Sub(before), d.timeout, d.timeout+d.tick)
		}
		time.Sleep(100 * time.Microsecond)
	}
	if d.context(time.Now()) == first {
		t.Error("a context outlived its tick")
	}
	a, b := d.context(time.Now()), d.context(time.Now())
	if a != b && time.Since(d.cur.Load().start) < d.tick/2 {
		t.Error("two calls in one tick got different contexts")
	}
}
