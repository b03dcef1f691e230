package badger

import (
	"context"
	"github.com/modelrelay/modelrelay/store"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
)

// acctMem is what Hold needs of an account, in memory: the account record as
// last committed, and the sum of the open holds this process has taken on
// it. Every writer of an account record holds the account's stripe from its
// transaction until it has published what it wrote here (afterWrite), so rec is
// the committed record whenever loaded is true. Hold takes only mu, never
// the stripe (except to load rec the first time), so it never waits for a
// commit in progress: it decides on the last committed balance, as though it
// had run just before that commit.
type acctMem struct {
	mu     sync.Mutex
	loaded bool
	rec    accountRec
	held   int64 // Σ the open holds in holdStripes of this account (not rec.Held)
	// keys are the key ids Hold has met on this account's holds, by id;
	// nil until the first.
	keys map[string]*keyMem
}

// keyMem is what Hold needs of a key, kept with its account's acctMem and
// under its mu: the key and spend records as last committed, and the sum
// of the open holds this process has reserved against it. As for the
// account, every writer of a key or spend record holds the account's
// stripe from its transaction until it has published the record here, so
// rec is the committed one whenever loaded is true; and the period is
// rolled by a transaction (see Store.admit), so Hold never decides on a
// period the ledger does not have.
// A keyMem is never replaced or removed: open holds point at it.
type keyMem struct {
	loaded bool   // rec and exists are the ledger's
	exists bool   // the key id names a key of this account
	rec    keyRec // the key and its spend as last committed (when exists)
	held   int64  // Σ the open holds in holdStripes reserved against it
}

// openHold is a hold this process has taken and not yet ended.
type openHold struct {
	rec holdRec
	seg uint64  // the hold log segment it is written in
	key *keyMem // the key it reserved against; nil for none
}

// holdStripe is one of the stripes of the open holds by request id. A hold
// is added and removed with its account's acctMem.mu held, so that held and
// the holds always agree.
type holdStripe struct {
	mu    sync.Mutex
	holds map[string]*openHold
}

// memory is the in-memory half of the ledger: accounts as Hold sees them and
// the open holds.
type memory struct {
	mu       sync.RWMutex
	accounts map[string]*acctMem
	holds    [stripeCount]holdStripe
}

func (m *memory) init() {
	m.accounts = make(map[string]*acctMem)
	for i := range m.holds {
		m.holds[i].holds = make(map[string]*openHold)
	}
}

// account returns the acctMem of id, adding an empty one.
func (m *memory) account(id string) *acctMem {
	m.mu.RLock()
	a := m.accounts[id]
	m.mu.RUnlock()
	if a != nil {
		return a
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if a = m.accounts[id]; a == nil {
		a = &acctMem{}
		m.accounts[id] = a
	}
	return a
}

func (m *memory) stripe(requestID string) *holdStripe {
	return &m.holds[fnv(requestID)%stripeCount]
}

// hold returns the open hold of requestID.
func (m *memory) hold(requestID string) (*openHold, bool) {
	s := m.stripe(requestID)
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.holds[requestID]
	return h, ok
}

// holdsOf calls fn with every open hold of account ("" for every account).
// With account set, call it with that account's acctMem.mu held for a view
// that agrees with its held.
func (m *memory) holdsOf(account string, fn func(*openHold)) {
	for i := range m.holds {
		s := &m.holds[i]
		s.mu.Lock()
		for _, h := range s.holds {
			if account == "" || h.rec.Account == account {
				fn(h)
			}
		}
		s.mu.Unlock()
	}
}

// loaded returns the acctMem of id with rec loaded and its mu held; the
// caller unlocks it. Loading reads the record under the account's stripe,
// which keeps every writer out. An unknown account is ErrNotFound.
func (b *Store) loaded(ctx context.Context, id string) (*acctMem, error) {
	a := b.mem.account(id)
	a.mu.Lock()
	if a.loaded {
		return a, nil
	}
	a.mu.Unlock()
	unlock := b.lock(id)
	defer unlock()
	a.mu.Lock()
	if a.loaded {
		return a, nil
	}
	var rec accountRec
	err := b.view(ctx, func(txn *badger.Txn) error {
		var err error
		rec, err = loadAccount(txn, id)
		return err
	})
	if err != nil {
		a.mu.Unlock()
		return nil, err
	}
	a.rec, a.loaded = rec, true
	return a, nil
}

// afterWrite ends a write of account, made under its stripe: it makes rec,
// the record the write committed (nil when it wrote none), the one Hold
// sees, or, after err, makes the next Hold read the account afresh. It
// returns err. Every writer of an account record but Settle (endHold) goes
// through it.
func (b *Store) afterWrite(account string, rec *accountRec, err error) error {
	if err != nil {
		b.forget(account)
		return err
	}
	if rec != nil {
		a := b.mem.account(account)
		a.mu.Lock()
		a.rec, a.loaded = *rec, true
		a.mu.Unlock()
	}
	return nil
}

// forget makes the next Hold read the account and its keys from the
// ledger: after a failed transaction a writer cannot be sure what was
// committed. The keys' open holds stay counted.
func (b *Store) forget(id string) {
	a := b.mem.account(id)
	a.mu.Lock()
	a.loaded = false
	for _, k := range a.keys {
		k.loaded = false
	}
	a.mu.Unlock()
}

// endHold removes h, ended by a transaction that committed acct and the
// spend of h's key (each nil when it wrote none), from memory and from its
// hold log segment.
func (b *Store) endHold(h *openHold, acct *accountRec, spent *spendRec) {
	a := b.mem.account(h.rec.Account)
	a.mu.Lock()
	s := b.mem.stripe(h.rec.RequestID)
	s.mu.Lock()
	delete(s.holds, h.rec.RequestID)
	s.mu.Unlock()
	a.held -= h.rec.Amount
	if acct != nil {
		a.rec, a.loaded = *acct, true
	}
	if k := h.key; k != nil {
		k.held -= h.rec.Amount
		if spent != nil && k.loaded {
			k.rec.spend = *spent
		}
	}
	a.mu.Unlock()
	b.holdLog.end(h.seg)
}

// publishKey makes rec, a key record just committed under its account's
// stripe, the one Hold sees, if Hold has met the key.
func (b *Store) publishKey(rec *keyRec) {
	a := b.mem.account(rec.Account)
	a.mu.Lock()
	if k := a.keys[rec.ID]; k != nil {
		k.rec, k.loaded, k.exists = *rec, true, true
	}
	a.mu.Unlock()
}

// keyView is the key of rec, read from the ledger, as the API shows it:
// the record this process has in memory when it has it loaded (the last
// committed), with its open holds in this process as Held.
func (m *memory) keyView(rec keyRec) store.Key {
	m.mu.RLock()
	a := m.accounts[rec.Account]
	m.mu.RUnlock()
	if a == nil {
		return rec.api()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := a.keys[rec.ID]
	if k == nil || !k.exists {
		return rec.api()
	}
	if k.loaded {
		rec = k.rec
	}
	key := rec.api()
	key.Held = pricing.Nano(k.held)
	return key
}

// heldOf is the sum of the holds open in this process on account id.
func (m *memory) heldOf(id string) int64 {
	m.mu.RLock()
	a := m.accounts[id]
	m.mu.RUnlock()
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held
}

// api is the account as the API shows it: Held counts the open holds of
// this process and those an older build left in the ledger (rec.Held).
func (a *acctMem) api() store.Account {
	acct := a.rec.api()
	acct.Held += pricing.Nano(a.held)
	return acct
}

// view is the account of rec, read from the ledger, as the API shows it:
// the record this process has in memory when it has one loaded (it is the
// last committed), with the open holds of this process counted. It adds
// nothing to memory.
func (m *memory) view(rec accountRec) store.Account {
	m.mu.RLock()
	a := m.accounts[rec.ID]
	m.mu.RUnlock()
	if a == nil {
		return rec.api()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.loaded {
		return a.api()
	}
	acct := rec.api()
	acct.Held += pricing.Nano(a.held)
	return acct
}
