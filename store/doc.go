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
// Values are small records private to this package (records.go), kept
// inline in the LSM tree, so the value log needs no garbage collection.
// Account ids may not contain '/', so one account's journal prefix never
// covers another's. Journal sequence numbers are per account, from 1, and
// the counter lives in the account record, so the counter and the entry are
// written by the same transaction that changes the balance.
//
// # Record format
//
// A record (every value but keyid/<key id>, which is the bare hash) is
// binary: one format tag byte naming the record type and layout version
// (0x01 account, 0x02 key, 0x03 hold, 0x04 journal entry, 0x05 job,
// 0x06 outcome; all version 1; and 0x07, version 2 of a settled call's
// outcome, which keeps only account, charge, sequence number and time: the
// request id is its key's, and its hold amount and note are its journal
// entry's, where Outcome reads them; a settled outcome v1 is still read,
// but a build before tag 0x07 cannot read a ledger that has one),
// then its fields in a fixed order with no
// names and nothing after the last. Strings are a uvarint length and the
// bytes (as given: ids are valid UTF-8, notes are not checked); amounts and
// usage counts are zigzag varints of int64 nano-USD or units; sequence
// numbers and list lengths uvarints; a bool one byte, 0 or 1; a time 8 bytes
// big-endian of unix nanoseconds, the zero time as math.MinInt64, so a
// record holds times from 1678 to 2262 and refuses to encode others. Every
// varint is in its shortest form and the decoder refuses anything else, so
// a record has exactly one encoding (FuzzDecodeRecord checks it). The field
// order of each layout is written next to its code in records.go; changing
// it means a new tag, and readers keep reading the old ones.
//
// Builds before the binary format wrote JSON records, which begin with '{'
// (never a tag). They are still read, through the same record types, whose
// JSON field tags must therefore not change; a record is rewritten in binary
// when it next changes, and nothing converts the rest. A damaged record is an
// error naming its key: `store: decode "acct/acme": balance: truncated
// varint`.
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
// 64 times (Hold cannot conflict and is never retried; see below). Two
// hundred concurrent holds on one account therefore run one
// after another against the real balance: none overdraws and none fails
// spuriously. Settle, Release and RefundJob ignore cancellation of their
// context: the call has happened and its books must close.
//
// # Holds without waiting for the disk
//
// Hold is the one transaction a relayed call waits for before it goes
// upstream, so Hold commits with txn.CommitWith and returns as soon as the
// transaction has passed badger's conflict check and been given its commit
// timestamp; the write to the log and the memtable finishes behind it.
// This is safe because badger's oracle makes every later transaction wait
// for it: a new transaction's read timestamp is the last commit timestamp
// handed out, and before it reads anything it waits
// (txnMark.WaitForMark) until every commit up to that timestamp has been
// applied. So the next Hold, Settle, Release or Balance, of this account or
// any other, sees the hold, and no two holds can spend the same credit. A
// Settle straight after its Hold in one goroutine finds the hold.
//
// CommitWith reports even a conflict only to its callback, after Hold has
// returned, so Hold must not be able to conflict: it runs under its
// account's stripe, which every writer of the account record takes, and
// under a second stripe of its request id, which serialises holds of one id
// on different accounts; Settle, Release and recovery write a hold's keys
// only when the hold exists, and then Hold refuses the id before it
// commits. (The checks are by 64-bit fingerprints of keys, so a collision
// could still make badger refuse the commit; it is handled as a failed
// write.) Should the write fail (an I/O error), the callback logs it at
// error level with the request id, and the request's Settle or Release
// returns ErrHoldNotWritten with the cause rather than ErrNoHold: the call
// was admitted but nothing can be charged for it. The failed ids are kept in
// a bounded set (the last 1024). Close refuses new holds and waits for the
// writes of those that returned.
//
// Settle, Release, Credit and the rest wait for their commit (and its
// fsync when SyncWrites is on). Settle is one read-write transaction: it
// reads the hold and the account and writes the journal entry, the account,
// the outcome, and the hold's deletion; nothing more can go without giving
// up the exactly-once outcome or the journal. Passing Settlement.Account
// saves the read transaction that otherwise looks the account up.
//
// # Memory
//
// OpenBadger sizes badger for records of a few hundred bytes and a gateway
// within 200 MB: two 8 MB memtables (each a Go-heap arena plus a log file
// mapped at twice its size), level-0 compaction at 2 tables and a write
// stall at 8, 1 MB base tables and two compactors (table builders take
// Go-heap buffers of twice the table size, and badger pools up to eight),
// no block cache (it holds only decompressed or decrypted blocks; ours are
// neither and are read in place from the mapped tables), no index cache
// (used only for encrypted tables) and 16 MB value log files. Badger writes
// new tables through a shared mapping, so recently written tables count in
// the resident set as file pages, which the kernel can reclaim.
// BenchmarkLedgerRSS measures a run of 200,000 calls.
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
