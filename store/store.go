package store

import (
	"context"
	"errors"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
)

// AutoRoute is the route name of a key that may call every model.
const AutoRoute = "auto"

// Errors the store returns; callers test them with errors.Is.
var (
	ErrNotFound       = errors.New("not found")
	ErrExists         = errors.New("already exists")
	ErrInsufficient   = errors.New("insufficient credit") // wrapped by *InsufficientError
	ErrAlreadySettled = errors.New("already settled")
	ErrNoHold         = errors.New("no such hold")
)

// InsufficientError says a hold could not be taken: Needed was asked for and
// Available could not cover it. Limit says which limit refused it:
// LimitAccount (Available is the balance minus open holds) or LimitKey
// (Available is what remains of the key's spend limit in its period).
type InsufficientError struct {
	Needed    pricing.Nano
	Available pricing.Nano
	Limit     string
}

func (e *InsufficientError) Error() string {
	if e.Limit == LimitKey {
		return "key spend limit reached: needed " + e.Needed.String() + " USD, remaining " + e.Available.String() + " USD"
	}
	return "insufficient credit: needed " + e.Needed.String() + " USD, available " + e.Available.String() + " USD"
}
func (e *InsufficientError) Unwrap() error { return ErrInsufficient }

// Account is a prepaid account.
type Account struct {
	ID      string       `json:"id"`
	Balance pricing.Nano `json:"balance_usd"` // may go below zero only by one call's overrun
	Held    pricing.Nano `json:"held_usd"`    // sum of open holds
	Created time.Time    `json:"created"`
	// AlertBelow is the low-balance threshold: the account counts in
	// AccountsBelowAlert while its available credit is under it (0: none).
	AlertBelow pricing.Nano `json:"alert_below_usd,omitempty"`
}

// Available is the credit a new hold can take.
func (a Account) Available() pricing.Nano { return a.Balance - a.Held }

// Key is an API key record. The plaintext key is never stored: Hash is the
// hex SHA-256 of it, and lookups are by hash.
type Key struct {
	ID      string    `json:"id"` // public identifier, "key_…", safe for logs
	Hash    string    `json:"hash"`
	Account string    `json:"account"`
	Route   string    `json:"route"` // a route name, or AutoRoute
	Exclude []string  `json:"exclude,omitempty"`
	Revoked bool      `json:"revoked"`
	Created time.Time `json:"created"`

	// Settings (UpdateKey changes them).
	Label   string       `json:"label,omitempty"`
	Limit   pricing.Nano `json:"limit_usd,omitempty"`   // spend limit per period; 0: none
	Reset   string       `json:"limit_reset,omitempty"` // ResetDaily, …; ResetNever
	Expires time.Time    `json:"expires,omitzero"`      // zero: never
	Allow   []string     `json:"allow,omitempty"`       // client networks; empty: any

	// Kept by the ledger, in the transactions that move the account's
	// credit: the charges settled in the period that began at PeriodStart
	// (a Hold in a later period starts a new one at 0), and the key's open
	// holds. A settle counts in the period current when it lands.
	Spent       pricing.Nano `json:"spent_usd"`
	Held        pricing.Nano `json:"held_usd"`
	PeriodStart time.Time    `json:"period_start,omitzero"`
}

// Hold reserves credit for one call from admission until settlement.
type Hold struct {
	RequestID string       `json:"request_id"`
	Account   string       `json:"account"`
	KeyID     string       `json:"key_id"`
	Model     string       `json:"model"`
	Route     string       `json:"route"`
	Endpoint  string       `json:"endpoint"`
	Amount    pricing.Nano `json:"amount_usd"`
	Created   time.Time    `json:"created"`
	Owner     string       `json:"owner"` // the process (boot id) that took it
}

// Entry kinds in the journal.
const (
	KindCredit   = "credit"   // credit added by the operator
	KindCharge   = "charge"   // a settled call
	KindRefund   = "refund"   // a refunded charge (failed video job)
	KindRecovery = "recovery" // a hold released at start-up after a crash (amount 0)
)

// Entry is one journal entry. Amount is signed: positive adds to the
// balance, negative takes from it. It never holds prompt, completion or file
// content.
type Entry struct {
	Seq          uint64        `json:"seq"`
	Kind         string        `json:"kind"`
	RequestID    string        `json:"request_id,omitempty"`
	Account      string        `json:"account"`
	KeyID        string        `json:"key_id,omitempty"`
	Model        string        `json:"model,omitempty"`
	Route        string        `json:"route,omitempty"`
	Endpoint     string        `json:"endpoint,omitempty"`
	Usage        pricing.Usage `json:"usage"`
	HoldAmount   pricing.Nano  `json:"hold_usd,omitempty"`
	Amount       pricing.Nano  `json:"amount_usd"`
	BalanceAfter pricing.Nano  `json:"balance_after_usd"`
	Time         time.Time     `json:"time"`
	Note         string        `json:"note,omitempty"`
}

// Settlement is what the gateway settles a call with.
type Settlement struct {
	RequestID string
	// Account is the hold's account when the caller knows it (the gateway
	// always does): it saves a read transaction per settlement. Empty means
	// "look it up"; a wrong account is an error, never a charge to it.
	Account string
	Charge  pricing.Nano // exact charge, taken in full even above the hold
	Usage   pricing.Usage
	Note    string // e.g. "estimated: stream cut after 5 chunks"
}

// Ledger keeps the books. Every balance change and its journal entry are one
// atomic transaction; concurrent calls can never spend the same credit twice.
// It is small enough for a PostgreSQL implementation to follow.
type Ledger interface {
	// Credit adds amount (> 0) to the account's balance, creating the account
	// if it does not exist.
	Credit(ctx context.Context, account string, amount pricing.Nano, note string) (Entry, error)
	// Hold reserves h.Amount of the account's available credit and, when
	// h.KeyID names a key, of that key's spend limit in the period that
	// contains h.Created (zero: now); the error wraps ErrInsufficient (as
	// *InsufficientError, whose Limit says which refused) when it cannot.
	// A zero or negative balance is always insufficient, even for a zero
	// hold. An unknown account is ErrNotFound; a request id with an open
	// hold ErrExists. A KeyID that names no key limits nothing.
	Hold(ctx context.Context, h Hold) error
	// Settle charges the call and releases the rest of its hold, exactly once
	// per request id: a second Settle or a Settle after Release returns
	// ErrAlreadySettled; no hold at all returns ErrNoHold.
	Settle(ctx context.Context, s Settlement) (Entry, error)
	// Release drops a hold without charging (the call failed); like Settle,
	// once: ErrAlreadySettled after an end, ErrNoHold with no hold at all.
	Release(ctx context.Context, requestID, reason string) error
	// Balance returns the account; ErrNotFound if it does not exist.
	Balance(ctx context.Context, account string) (Account, error)
	// Charges lists the account's journal entries, newest first, at most
	// limit; ErrNotFound for an unknown account.
	Charges(ctx context.Context, account string, limit int) ([]Entry, error)
}

// Allotter is implemented by a store whose holds commit in a database that
// replicas share (store/postgres). A replica sets aside some of an
// account's credit as one hold, an allotment; it admits that account's
// calls against it in memory, and carves each call's own hold out of it
// off the call's path (gateway/billing/allot.go), so that no call waits for a
// database commit before its upstream answer reaches the caller.
type Allotter interface {
	// Allot takes h as an allotment: checked and reserved as Hold does
	// (its errors are Hold's), renewed, recovered when its owner dies and
	// ended by Release like any hold; its release gives back what was not
	// carved out of it.
	Allot(ctx context.Context, h Hold) error
	// Carve moves h.Amount out of from, an open allotment of h.Account,
	// into h, a hold of its own, settled or released like any: the
	// account's held does not change, and h counts in its key's spend
	// (neither the account's credit nor the key's limit is checked: the
	// caller carves only for keys without a limit). The error wraps
	// ErrNoHold when from is not open or holds less than h.Amount,
	// ErrExists when h's request id has a hold or an outcome already (a
	// carve tried again after its answer was lost: the hold stays the
	// caller's, to settle or release).
	Carve(ctx context.Context, from string, h Hold) error
	// HoldAdmitted takes h as Hold does but checks neither the account's
	// credit nor the key's limit: the hold of a call already admitted
	// against an allotment that is gone (its replica was cut off from
	// the database past the lease, and a sweep released it), whose
	// answer is out and which must be charged. It may leave the account's
	// available credit below zero, by at most what the gone allotment
	// held. The error wraps ErrExists when h's request id has a hold or
	// an outcome already, ErrNotFound when the account does not exist.
	HoldAdmitted(ctx context.Context, h Hold) error
}

// MaxAccountPage bounds a page of ListAccounts.
const MaxAccountPage = 1000

// Keys keeps accounts' API keys.
type Keys interface {
	CreateAccount(ctx context.Context, id string) (Account, error)
	// ListAccounts lists the accounts whose id sorts after after ("" from
	// the first), in id order, at most limit (≤ 0 or above MaxAccountPage
	// means MaxAccountPage): one page, the last id being the next page's
	// after.
	ListAccounts(ctx context.Context, after string, limit int) ([]Account, error)
	// CreateKey stores k (whose Hash is already set); ErrExists on a
	// duplicate hash or id, ErrNotFound if its account does not exist.
	CreateKey(ctx context.Context, k Key) error
	// KeyByHash returns the key, revoked or not; ErrNotFound if none.
	KeyByHash(ctx context.Context, hash string) (Key, error)
	ListKeys(ctx context.Context, account string) ([]Key, error) // account "" lists all; oldest first
	// RevokeKey marks the key revoked (again is a no-op); ErrNotFound if none.
	RevokeKey(ctx context.Context, id string) (Key, error)
}

// Job is a video job: ids, account, line and amount, never the prompt.
type Job struct {
	RequestID string       `json:"request_id"` // the provider's id, returned to the caller
	Account   string       `json:"account"`
	KeyID     string       `json:"key_id"`
	Model     string       `json:"model"`
	Route     string       `json:"route"`
	Line      string       `json:"line"`
	Amount    pricing.Nano `json:"amount_usd"`
	Refunded  bool         `json:"refunded"`
	Created   time.Time    `json:"created"`
}

// Jobs keeps video jobs.
type Jobs interface {
	// PutJob records j once: ErrExists for its request id again,
	// ErrNotFound if its account does not exist.
	PutJob(ctx context.Context, j Job) error
	Job(ctx context.Context, requestID string) (Job, error) // ErrNotFound if none
	// RefundJob credits the job's amount back exactly once; refunded reports
	// whether this call did it.
	RefundJob(ctx context.Context, requestID, reason string) (refunded bool, err error)
}

// ErrUnavailable wraps the errors of a store that cannot answer now — a
// database that is down, unreachable, shutting down or past its statement
// timeout. Nothing was written: every money step is atomic. The gateway
// answers 503 with Retry-After, and a Settle that met it is retried until
// the store answers (a replayed settle changes nothing).
var ErrUnavailable = errors.New("store unavailable")

// Service is what serving calls needs of a store: the gateway's requests,
// its admin API and the console's logins (gateway.Store is this). It is
// the one list of the store's parts: Store adds what opening, recovering
// and closing a store takes, and the conformance kit checks all of Store.
// The optional parts (Allotter, which the gateway finds by type assertion;
// Exporter, which relay store copy reads) are in neither: a store that has
// one says so with a compile-time guard and claims it to storetest.Run,
// which fails when a claimed part is missing.
type Service interface {
	Ledger
	Keys
	KeyLimits
	Books // what account holders read of their books
	Jobs
	Console // the web console's logins and sessions
}

// Store is all that the gateway, the admin API, relay serve and crash
// recovery need of a store; store/badger and store/postgres implement it
// and store/storetest checks both.
type Store interface {
	Service
	// RecoverHolds releases, uncharged, the open holds whose owner has
	// ended (Badger: every hold left by an earlier process, at start-up;
	// PostgreSQL: holds whose lease has run out), each with a KindRecovery
	// entry; it reports how many.
	RecoverHolds(ctx context.Context) (int, error)
	// OpenHolds lists every open hold, oldest first.
	OpenHolds(ctx context.Context) ([]Hold, error)
	// Outcome is how the hold of requestID ended; ErrNotFound if it has not.
	Outcome(ctx context.Context, requestID string) (Outcome, error)
	// Audit checks an account's books (see AuditReport).
	Audit(ctx context.Context, account string) (AuditReport, error)
	// Owner is the name this process gives the holds it takes.
	Owner() string
	// Ping reports whether the store answers now (readiness).
	Ping(ctx context.Context) error
	Close() error
}
