// Package store keeps ModelRelay's books: prepaid accounts and their
// balances, API keys (by hash), holds taken at admission, the journal of
// credits, charges, refunds and recoveries, and video jobs. store.go is the
// contract (Ledger, Keys, Jobs) the gateway uses; Badger is its embedded
// implementation on github.com/dgraph-io/badger/v4.
//
// What it must not do: store a plaintext API key (only its SHA-256, see
// HashKey), or any prompt, completion or file content (entries, holds and
// jobs carry ids, model, route, usage numbers and amounts only); use a float
// for money (every amount is int64 nano-USD); change a balance without its
// journal entry in the same transaction.
//
// # Key layout
//
//	acct/<account>             account record: balance, held, journal counter, created
//	key/<sha256 hex>           key record (id, account, route, exclusions, revoked)
//	keyid/<key id>             the hash of that key, for RevokeKey
//	hold/<request id>          an open hold
//	done/<request id>          how a hold ended (Outcome): settled, released or recovered
//	jrnl/<account>/<seq>       journal entry; seq is 8 bytes big-endian, so byte order is journal order
//	job/<request id>           video job
//
// Values are small JSON records private to this package (amounts as int64
// nano-USD, whatever JSON form pricing.Nano takes in the API), kept inline in
// the LSM tree, so the value log needs no garbage collection. Account ids may
// not contain '/', so one account's journal prefix never covers another's.
// Journal sequence numbers are per account, from 1, and the counter lives in
// the account record, so the counter and the entry are written by the same
// transaction that changes the balance.
//
// # Transactions
//
// Every balance change, its journal entry, the counter and the hold or
// outcome it concerns commit in one badger transaction, or not at all.
// Badger transactions are optimistic (serialisable snapshot isolation): a
// commit whose reads were changed by another commit fails with ErrConflict.
// To keep that from failing calls under load, operations on one account are
// serialised inside the process by one of 256 striped mutexes (FNV-1a of the
// account id), and a transaction that still conflicts — on a key shared by
// two accounts, such as a request id reused across them — is retried, at most
// 64 times. Two hundred concurrent holds on one account therefore run one
// after another against the real balance: none overdraws and none fails
// spuriously. Settle, Release and RefundJob ignore cancellation of their
// context: the call has happened and its books must close.
//
// Exactly once: a request id is held once (a second Hold of the same id, open
// or ended, returns ErrExists); Settle and Release delete the hold and write
// done/<request id> in the same transaction, so a second Settle or Release
// finds the outcome and returns ErrAlreadySettled. RefundJob sets the job's
// Refunded flag in the transaction that credits the refund.
//
// # The overrun bound
//
// Settle takes the charge in full even when the real usage cost more than
// the hold (the quote is the most a call can cost, so this should be rare:
// a plugin's estimate, a stream settled from a documented estimate). That is
// the only way a balance goes below zero. It is bounded: Hold refuses any
// hold, even a zero one, while the balance is at or below zero, and otherwise
// admits only what Available (balance − open holds) covers. So each call can
// take at most its own overrun (charge − hold) beyond the credit it was
// admitted on, a negative balance is at most the sum of the overruns of the
// calls that were in flight together (one call's, when calls run one at a
// time), and no call is admitted on credit already owed.
//
// # Recovery after a crash
//
// Every hold records the Owner (boot id) of the process that took it. A hold
// whose process ended cannot settle: the client's connection and the usage
// went with it. At start-up RecoverHolds releases every open hold whose
// owner is not the current process, writing a KindRecovery journal entry
// (Amount 0, HoldAmount the hold, Note "hold released at start-up: owner <x>
// ended without settling") and an Outcome in state "recovered". We release
// rather than charge: the usage is unknown, and the customer must not pay for
// a call whose answer they may never have received. The rule is safe because
// badger lets one process open a directory at a time, so every hold of
// another owner belongs to a process that has ended. A PostgreSQL
// implementation shared by several replicas needs a liveness check per owner
// before applying it.
package store
