package gateway

import (
	"context"
	"sync"
	"time"
)

// settleWaitMax bounds how long an admin read waits for an account's calls
// to settle before it reads the ledger as it is.
const settleWaitMax = 5 * time.Second

// settling follows, per account, the calls whose answer the client already
// has but whose settle has not ended (a JSON answer is sent before its call
// is settled; see relayJSON). The admin reads of an account wait for them,
// so that a balance or charges read made after a call's answer shows its
// charge, as it did when the answer waited for the settle. A new call's hold
// does not wait: it sees the open hold, which reserves at least as much as
// the charge will take unless the call overran its quote.
type settling struct {
	mu sync.Mutex
	m  map[string]*pending // the calls since the last wait, per account
}

// pending is a group of calls of one account; done is closed when the last
// of them has ended and the group is sealed (a wait took it out of the map)
// or empty.
type pending struct {
	n    int
	done chan struct{}
}

func newSettling() *settling { return &settling{m: make(map[string]*pending)} }

// begin registers a call of account about to answer before settling and
// returns its group, which end takes.
func (s *settling) begin(account string) *pending {
	s.mu.Lock()
	p := s.m[account]
	if p == nil {
		p = &pending{done: make(chan struct{})}
		s.m[account] = p
	}
	p.n++
	s.mu.Unlock()
	return p
}

// end records that the settle of a call of p (or the release of its hold)
// has ended.
func (s *settling) end(account string, p *pending) {
	s.mu.Lock()
	if p.n--; p.n == 0 {
		close(p.done)
		if s.m[account] == p {
			delete(s.m, account)
		}
	}
	s.mu.Unlock()
}

// wait waits until the calls of account that answered before it was called
// have settled, or until ctx ends or settleWaitMax has passed. Calls that
// begin meanwhile join a new group and do not prolong it.
func (s *settling) wait(ctx context.Context, account string) {
	s.mu.Lock()
	p := s.m[account]
	delete(s.m, account)
	s.mu.Unlock()
	if p == nil {
		return
	}
	t := time.NewTimer(settleWaitMax)
	defer t.Stop()
	select {
	case <-p.done:
	case <-ctx.Done():
	case <-t.C:
	}
}
