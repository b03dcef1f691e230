package billing

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestWorkersNeverQueue: tasks that block run at once, each on its own
// worker, however many are under way; none waits behind another.
func TestWorkersNeverQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorkers()
		release := make(chan struct{})
		var started sync.WaitGroup
		const n = 50
		started.Add(n)
		for range n {
			w.run(func() { started.Done(); <-release })
		}
		started.Wait() // every task began though none has ended
		if got := w.live.Load(); got != n {
			t.Fatalf("%d workers for %d blocked tasks", got, n)
		}
		close(release)
		time.Sleep(workerIdle + time.Millisecond) // the idle workers end
		synctest.Wait()
		if got := w.live.Load(); got != 0 {
			t.Fatalf("%d workers after %v idle, want none", got, workerIdle)
		}
	})
}

// TestWorkersAreReused: tasks one after another run on the worker the first
// started, which ends once idle for workerIdle.
func TestWorkersAreReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorkers()
		for i := range 100 {
			done := make(chan struct{})
			w.run(func() { close(done) })
			<-done
			synctest.Wait() // the worker is back waiting for a task
			if got := w.live.Load(); got != 1 {
				t.Fatalf("after task %d: %d workers, want the one", i+1, got)
			}
		}
		time.Sleep(workerIdle - time.Millisecond)
		synctest.Wait()
		if got := w.live.Load(); got != 1 {
			t.Fatalf("%d workers just before the idle limit, want 1", got)
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if got := w.live.Load(); got != 0 {
			t.Fatalf("%d workers after %v idle, want none", got, workerIdle)
		}
	})
}
