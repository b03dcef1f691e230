package store

import (
	"errors"
	"sync"
)

// maxLostHolds bounds how many failed hold writes holdWrites remembers; past
// it the oldest is forgotten (its Settle then returns ErrNoHold; the log
// still has it). Failures are rare: a disk error, which the log shows.
const maxLostHolds = 1024

// errClosed is what a Hold that starts after Close returns.
var errClosed = errors.New("store: closed")

// holdWrites follows the holds whose commit Hold did not wait for: how many
// writes of each request id are still in flight (so that Close, and a Settle
// that found no hold, can wait for them), and the ids whose write failed.
type holdWrites struct {
	mu       sync.Mutex
	changed  sync.Cond      // broadcast when a write ends
	pending  map[string]int // request id → holds in progress or being written
	inFlight int            // the sum of pending
	closed   bool           // Close has begun: no new holds
	lostErr  map[string]error
	lostIDs  []string // the keys of lostErr, oldest first
}

func (w *holdWrites) init() {
	w.changed.L = &w.mu
	w.pending = make(map[string]int)
	w.lostErr = make(map[string]error)
}

// begin registers a hold of requestID about to be taken; every begin is
// followed by one end. It fails once Close has begun.
func (w *holdWrites) begin(requestID string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errClosed
	}
	w.pending[requestID]++
	w.inFlight++
	return nil
}

// end records that a hold of requestID was refused (err nil, nothing was
// committed) or that its write ended with err.
func (w *holdWrites) end(requestID string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.pending[requestID]; n > 1 {
		w.pending[requestID] = n - 1
	} else {
		delete(w.pending, requestID)
	}
	w.inFlight--
	if err != nil {
		if _, seen := w.lostErr[requestID]; !seen {
			if len(w.lostIDs) == maxLostHolds {
				delete(w.lostErr, w.lostIDs[0])
				w.lostIDs = w.lostIDs[1:]
			}
			w.lostIDs = append(w.lostIDs, requestID)
		}
		w.lostErr[requestID] = err
	}
	w.changed.Broadcast()
}

// lost waits until no hold of requestID is being written and returns the
// error its write failed with, or nil.
func (w *holdWrites) lost(requestID string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.pending[requestID] > 0 {
		w.changed.Wait()
	}
	return w.lostErr[requestID]
}

// close refuses new holds and waits for every one in progress to end.
func (w *holdWrites) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for w.inFlight > 0 {
		w.changed.Wait()
	}
}
