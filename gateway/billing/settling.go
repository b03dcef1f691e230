package billing

import (
	"context"
	"slices"
	"sync"
	"time"
)

// settleWaitMax bounds how long an admin read waits for an account's calls
// to settle before it reads the ledger as it is.
const settleWaitMax = 5 * time.Second

// settling follows, per account, the calls whose JSON answer the client
// already has but whose settle has not ended (see Ticket.Answering). The admin reads
// of an account wait for them, so that a balance or charges read made after
// a call's answer shows its charge, as it did when the answer waited for the
// settle. A new call's hold does not wait: it sees the open hold.
//
// Calls join the account's open group; a wait seals that group (later calls
// start a new one) and waits for it and for the groups earlier waits sealed
// that are still settling. So a wait covers every call answered before it
// began, concurrent waits each see all of them, and steady traffic cannot
// prolong a wait.
type settling struct {
	mu sync.Mutex
	m  map[string]*accountSettling
}

type accountSettling struct {
	open   *pending   // the group new calls join; nil when there is none
	sealed []*pending // groups sealed by waits, not yet settled
}

// pending is a group of calls of one account. done, made by the first wait
// that needs it (most groups never meet one), is closed when the last of
// them has ended.
type pending struct {
	n    int
	done chan struct{}
}

func newSettling() *settling { return &settling{m: make(map[string]*accountSettling)} }

// begin registers a call of account about to answer before settling and
// returns its group, which end takes.
func (s *settling) begin(account string) *pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.m[account]
	if a == nil {
		a = &accountSettling{}
		s.m[account] = a
	}
	if a.open == nil {
		a.open = &pending{}
	}
	a.open.n++
	return a.open
}

// end records that the settle of a call of group p (or the release of its
// hold) has ended.
func (s *settling) end(account string, p *pending) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.n--; p.n > 0 {
		return
	}
	if p.done != nil {
		close(p.done)
	}
	a := s.m[account]
	if a == nil {
		return
	}
	if a.open == p {
		a.open = nil
	} else if i := slices.Index(a.sealed, p); i >= 0 {
		a.sealed = slices.Delete(a.sealed, i, i+1)
	}
	if a.open == nil && len(a.sealed) == 0 {
		delete(s.m, account)
	}
}

// wait waits until the calls of account that answered before it was called
// have settled, or until ctx ends or settleWaitMax has passed.
func (s *settling) wait(ctx context.Context, account string) {
	s.mu.Lock()
	a := s.m[account]
	if a == nil {
		s.mu.Unlock()
		return
	}
	if a.open != nil {
		a.sealed = append(a.sealed, a.open)
		a.open = nil
	}
	done := make([]chan struct{}, len(a.sealed))
	for i, p := range a.sealed {
		if p.done == nil {
			p.done = make(chan struct{})
		}
		done[i] = p.done
	}
	s.mu.Unlock()
	t := time.NewTimer(settleWaitMax)
	defer t.Stop()
	for _, d := range done {
		select {
		case <-d:
		case <-ctx.Done():
			return
		case <-t.C:
			return
		}
	}
}

// streamsEnding follows, by request id, this process's streams whose
// settle has not been written. A stream is settled after its last event,
// and a client may read that event and ask GET /v1/generations/{id} before
// the settle lands: the read waits for it (see Ledger.WaitStream) instead of
// answering 404. Streams are not in settling: an admin read must not wait
// for a stream still running.
type streamsEnding struct {
	mu sync.Mutex
	m  map[string]*streamEnding
}

type streamEnding struct {
	account string
	done    chan struct{} // nil until a read waits
}

func newStreamsEnding() *streamsEnding { return &streamsEnding{m: make(map[string]*streamEnding)} }

// begin registers the stream of request rid, a call of account.
func (s *streamsEnding) begin(rid, account string) {
	s.mu.Lock()
	s.m[rid] = &streamEnding{account: account}
	s.mu.Unlock()
}

// end records that the stream of request rid is settled (or released).
func (s *streamsEnding) end(rid string) {
	s.mu.Lock()
	e := s.m[rid]
	delete(s.m, rid)
	s.mu.Unlock()
	if e != nil && e.done != nil {
		close(e.done)
	}
}

// wait waits until the stream of request rid, a call of account, has
// ended, or until ctx ends or settleWaitMax has passed; it reports whether
// rid was such a stream of this process, not yet ended. Another account's
// stream is not waited for: its reader learns nothing of it.
func (s *streamsEnding) wait(ctx context.Context, rid, account string) bool {
	s.mu.Lock()
	e := s.m[rid]
	if e == nil || e.account != account {
		s.mu.Unlock()
		return false
	}
	if e.done == nil {
		e.done = make(chan struct{})
	}
	done := e.done
	s.mu.Unlock()
	t := time.NewTimer(settleWaitMax)
	defer t.Stop()
	select {
	case <-done:
	case <-ctx.Done():
	case <-t.C:
	}
	return true
}
