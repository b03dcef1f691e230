package billing

import (
	"sync/atomic"
	"time"
)

// workers runs the ledger's per-call background work (a detached settle, a
// hold beside its upstream request, a carve) on goroutines that outlive
// one task. A goroutine started for each task begins on a small stack and
// grows it, copying every frame, each time the store's code goes deeper
// (badger's lookups have large frames): under load that copying was about
// a tenth of the gateway's CPU. A worker keeps the stack it grew; the
// garbage collector halves an idle one at most once per cycle.
//
// run never waits: a task goes to an idle worker when there is one, and to
// a new worker otherwise, so there are never fewer workers than tasks
// under way, and none waits in a queue behind another's store write. A
// worker idle for workerIdle ends.
type workers struct {
	tasks chan func()
	idle  time.Duration
	live  atomic.Int64 // for tests
}

// workerIdle is how long a worker waits for a task before it ends.
const workerIdle = 10 * time.Second

func newWorkers() *workers {
	return &workers{tasks: make(chan func()), idle: workerIdle}
}

// run runs f on an idle worker, or on a new one.
func (w *workers) run(f func()) {
	select {
	case w.tasks <- f:
	default:
		w.live.Add(1)
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	defer w.live.Add(-1)
	f()
	t := time.NewTimer(w.idle)
	defer t.Stop()
	for {
		select {
		case f := <-w.tasks:
			f()
			t.Reset(w.idle)
		case <-t.C:
			return
		}
	}
}
