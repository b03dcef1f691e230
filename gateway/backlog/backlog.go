// Package backlog keeps a replica's writes to its store from outrunning the
// store.
//
// A relayed call writes to the ledger two or three times: its hold (or the
// carve of its hold out of an allotment), then its settle or release. Some
// of these run after the call has been answered, and the ones that must
// land (the carve, the settle) are tried again while the store is
// unavailable. Without a bound, a store that falls behind collects them
// faster than it books them; each write that times out in its queue is sent
// again into the same queue, and the retries take the CPU the queue needed
// to drain: a metastable failure that outlives the load that caused it.
//
// Three things here make the loop converge instead:
//
//   - Tracker counts the writes under way — waiting in the store's queue
//     or being sent — and the age of the oldest. A write waiting for its
//     next try is not under way (the store is not working on it): the
//     retry budget bounds what those cost.
//     Admission asks it before a call does any work: past either bound the
//     call is refused at once (the gateway answers 503 with Retry-After),
//     so a replica never admits more calls than its store can book, and
//     the work the store is asked for falls as soon as it falls behind.
//   - Retrier tries a write again only when the store answered that it is
//     unavailable (waiting in a queue is not failing), with exponential
//     backoff and jitter, and every retry of the replica takes a token from
//     one shared budget whose rate halves on each failed retry and doubles
//     on each one that lands: while the store is down the retries are a
//     trickle, whatever their number, and they speed up as it answers.
//   - Retrier coalesces the tries of one write (what, request id) under
//     way at once into one.
package backlog

import (
	"sync"
	"sync/atomic"
	"time"
)

// Tracker follows the store writes under way. The zero value is not
// usable: NewTracker.
type Tracker struct {
	maxWrites int
	maxWait   time.Duration

	mu sync.Mutex
	// The writes under way in the order they began: the oldest first.
	head, tail *Write
	n          int

	refused atomic.Uint64
}

// Write is one store write under way (Begin to End).
type Write struct {
	start      time.Time
	prev, next *Write
	t          *Tracker
}

// NewTracker returns a Tracker that is behind once more than maxWrites
// writes are under way, or the oldest has been for more than maxWait; a
// bound ≤ 0 is not checked.
func NewTracker(maxWrites int, maxWait time.Duration) *Tracker {
	return &Tracker{maxWrites: maxWrites, maxWait: maxWait}
}

// Begin records a write that begins at now; End it when it has landed or
// failed for good.
func (t *Tracker) Begin(now time.Time) *Write {
	w := &Write{start: now, t: t}
	t.mu.Lock()
	w.prev = t.tail
	if t.tail != nil {
		t.tail.next = w
	} else {
		t.head = w
	}
	t.tail = w
	t.n++
	t.mu.Unlock()
	return w
}

// End records that w is over. Ending a nil Write does nothing; ending one
// twice is a bug.
func (w *Write) End() {
	if w == nil {
		return
	}
	t := w.t
	t.mu.Lock()
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		t.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		t.tail = w.prev
	}
	w.prev, w.next = nil, nil
	t.n--
	t.mu.Unlock()
}

// State is the writes under way at one moment.
type State struct {
	Writes int           // how many
	Oldest time.Duration // how long the oldest has been under way
}

// State returns the writes under way at now.
func (t *Tracker) State(now time.Time) State {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := State{Writes: t.n}
	if t.head != nil {
		s.Oldest = max(now.Sub(t.head.start), 0)
	}
	return s
}

// Admit reports whether a new call may be admitted at now, and the state
// that decided it; a refusal is counted (Refused).
func (t *Tracker) Admit(now time.Time) (State, bool) {
	s := t.State(now)
	if (t.maxWrites > 0 && s.Writes > t.maxWrites) || (t.maxWait > 0 && s.Oldest > t.maxWait) {
		t.refused.Add(1)
		return s, false
	}
	return s, true
}

// Refuse counts a call refused because a write of its waited too long.
func (t *Tracker) Refuse() { t.refused.Add(1) }

// Refused is how many calls Admit refused, and those counted by Refuse.
func (t *Tracker) Refused() uint64 { return t.refused.Load() }
