package billing

import (
	"sync"
	"time"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// A hold that overlaps the upstream request.
//
// On PostgreSQL a hold is a round trip and a commit flush, which a call
// waits for before it goes upstream (about 0.6 ms on an idle database, a
// millisecond or more under load). Where the account plainly has the
// credit, the gateway sends the hold and the upstream request at once and
// waits for both before the answer's first byte (Hold, Ticket.Wait): the client
// sees the hold's commit only where it outlasts the provider's answer. Every
// guarantee of a hold stands — it is the same statement, taken before
// anything reaches the client, and a refused hold is the call's answer, the
// upstream request cancelled. What overlap costs is a provider's work on a
// call that is then refused, so it is kept to calls whose account last
// showed at least overlapMargin times their hold, on a key with no spend
// limit; any refused hold of the account ends it until a settle shows the
// balance again. On Badger a hold takes microseconds in memory, and calls
// never overlap.

// overlapMargin is how many times its hold the balance of a call's account
// must have shown for the hold to overlap the upstream request.
const overlapMargin = 1000

// overlapFresh is how long a balance seen at a settle counts.
const overlapFresh = 10 * time.Second

// maxCreditSeen bounds the accounts creditSeen remembers; past it, it
// starts over.
const maxCreditSeen = 1 << 16

// creditSeen remembers each account's balance as this replica's last settle
// left it.
type creditSeen struct {
	mu sync.Mutex
	m  map[string]seenBalance
}

type seenBalance struct {
	balance pricing.Nano
	at      time.Time
}

func newCreditSeen() *creditSeen { return &creditSeen{m: make(map[string]seenBalance)} }

// saw records account's balance after a settle at t.
func (s *creditSeen) saw(account string, balance pricing.Nano, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[account]; !ok && len(s.m) >= maxCreditSeen {
		clear(s.m)
	}
	s.m[account] = seenBalance{balance: balance, at: t}
}

// share is 1/n of account's balance last seen (0 if none is).
func (s *creditSeen) share(account string, n pricing.Nano) pricing.Nano {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.m[account].balance/n, 0)
}

// forget drops account's balance: a hold of it was refused.
func (s *creditSeen) forget(account string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, account)
}

// ample reports whether account's balance, seen within overlapFresh of t,
// was at least overlapMargin times hold.
func (s *creditSeen) ample(account string, hold pricing.Nano, t time.Time) bool {
	s.mu.Lock()
	b, ok := s.m[account]
	s.mu.Unlock()
	if !ok || t.Sub(b.at) > overlapFresh {
		return false
	}
	need := max(hold, 1)
	return b.balance/overlapMargin >= need
}

// overlaps reports whether c's hold goes beside its upstream request
// (see Hold): on a store whose holds commit in a database, for a call
// answered from its upstream response (not one charged before its answer,
// a video job, whose job the store records before the answer), on a key
// with no spend limit, of an account that plainly has the credit.
func (l *Ledger) overlaps(c Call) bool {
	return l.overlap && !c.ChargedFirst && c.Key.Limit == 0 &&
		l.seen.ample(c.Key.Account, c.Amount, time.Now())
}

// allotsCredit reports whether calls that may overlap their hold are
// admitted against allotments (allot.go) under c: unless billing.allot is
// false.
func allotsCredit(c config.Config) bool {
	return c.Billing.Allot == nil || *c.Billing.Allot
}

// overlapsHolds reports whether holds overlap the upstream request under
// c: on PostgreSQL, unless billing.overlap_hold is false.
func overlapsHolds(c config.Config) bool {
	return c.Store.Driver == store.DriverPostgres && (c.Billing.OverlapHold == nil || *c.Billing.OverlapHold)
}
