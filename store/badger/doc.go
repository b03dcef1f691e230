// Package badger is the embedded implementation of the store contract, on
// github.com/dgraph-io/badger/v4: one process, one data directory, the
// default of relay demo, make run and a single relay serve.
//
// What it must not do: store a plaintext API key (only its SHA-256, see
// HashKey), or any prompt, completion or file content (entries, holds and
// jobs carry ids, model, route, usage numbers and amounts only); use a float
// for money (every amount is int64 nano-USD); change a balance without its
// journal entry in the same transaction.
//
// # Key layout
//
//	acct/<account>             account record: balance, held, journal counter, created, alert threshold
//	key/<sha256 hex>           key record (id, account, route, exclusions, revoked; label, limit, reset, expiry, allow-list)
//	keyid/<key id>             the hash of that key, for RevokeKey, UpdateKey and Hold
//	spend/<key id>             the key's spend in its period and the period's start (none: nothing spent yet)
//	hold/<request id>          an open hold, as older builds kept them (this one keeps them in memory)
//	done/<request id>          how a hold ended (Outcome): settled, released or recovered
//	jrnl/<account>/<seq>       journal entry; seq is 8 bytes big-endian, so byte order is journal order
//	job/<request id>           video job
//	login/<email>              console login (account, password hash, setup token hash and expiry)
//	setup/<setup hash>         the email of the login whose one-time setup token that is
//	sess/<session id>          console session (expires with badger's TTL at its expiry)
//	lsess/<email>\x00<id>      (empty) a login's session, so that SetPassword ends them all
//
// Next to badger's files, holds/ has the hold log (see "Holds").
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
// entry's, where Outcome reads them), then its fields in a fixed order with
// no names and nothing after the last. Key limits added 0x08 account v2
// (v1 and the alert threshold), 0x09 key v2 (v1 and label, limit, reset,
// expiry, allow-list), 0x0a outcome v3 (v1 and the call's key id, model,
// route and endpoint, for a released call, which has no journal entry) and
// 0x0b key spend v1 (spent, period start); the web console added 0x0c
// login v1 and 0x0d session v1 (console.go has their fields). Each newer layout is v1's fields
// and then its own; the older is still read (its new fields zero), and a
// record is written in the newest when it next changes. A build before a
// tag cannot read a ledger that has one. Strings are a uvarint length and the
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
// Every balance change, its journal entry, the counter and the outcome of
// the hold it ends commit in one badger transaction, or not at all. Badger
// transactions are optimistic (serialisable snapshot isolation): a commit
// whose reads were changed by another commit fails with ErrConflict. To
// keep that from failing calls under load, the writers of an account and
// of its keys (CreateAccount, Credit, SetAlert, Settle, Release,
// RefundJob, recovery; CreateKey, UpdateKey, RevokeKey, and the Hold that
// starts a key's period) are serialised inside the process by one of 256
// striped mutexes (FNV-1a of the account id), and a
// transaction that still conflicts — on a key shared by two accounts, such
// as a request id reused across them — is retried, at most 64 times. Two
// hundred concurrent settles on one account therefore run one after another
// against the real balance, and none fails spuriously. Settle, Release and
// RefundJob ignore cancellation of their context: the call has happened and
// its books must close. They wait for their commit (and its fsync when
// SyncWrites is on). Settle reads the account and the request id's outcome
// key and writes three keys: the journal entry, the account and the
// outcome, and a fourth, the key's spend record, for a call of a key;
// Release writes the outcome alone.
//
// # Holds
//
// A hold lives from admission to the end of its call, and every hold is
// released when its process ends: that process's calls can no longer
// settle. So holds are kept in memory, not in badger, and Hold, the one
// operation a relayed call waits for before it goes upstream, does not wait
// for badger: only the first Hold on an account in a process (and the first
// after a write of the account failed) reads the account, under its stripe.
// Per account the store keeps, in memory, the account record as
// last committed and the sum of its open holds; Balance and Hold read them,
// and Account.Held is that sum. Each writer of an account record holds the
// account's stripe from its transaction until it has put the record it
// committed in memory, so memory never shows an uncommitted balance. Hold
// takes only the account's in-memory lock, not the stripe, so it does not
// wait for a Settle in progress; it decides on the balance before that
// settle, as though it had run just before it, which is a serial order.
// Holds of one account are serialised by that lock, so none overdraws:
// Hold admits only what Available (balance − open holds) covers.
//
// So that a hold still survives a crash of its process, Hold appends it to
// the hold log before it returns: holds/<16 hex digits>.holds, segments of
// 1 MB, each frame a uvarint length, the hold record (tag 0x03, as
// hold/<id>) and its CRC-32C. On Linux a segment's blocks are allocated
// when it is created (a store into a sparse page on a full disk would be a
// SIGBUS) and it is mapped shared, and an append is a copy of about 100
// bytes into the mapping, with no system call (elsewhere it is a write(2));
// with SyncWrites an fsync follows, under the log's lock, so holds then
// take their turn for the disk as commits do. Bytes stored into a shared mapping are in
// the kernel's page cache at once, so a crash of the process loses no hold;
// a crash of the machine may lose the last ones, as it may lose badger's
// last commits. A hold ends in the ledger
// (its outcome), never in the log: a segment is deleted when it is no longer
// appended to and every hold in it has ended. A failed append refuses the
// hold. A badger key per hold would cost a write and a delete per call, in
// the tree, its log, and its compactions; this costs a sequential append.
//
// Hold does not read the ledger, so it cannot see that a request id has
// already ended; the transaction that ends the hold reads the outcome key
// and refuses such a hold with ErrExists, dropping it uncharged, and the
// ended call's records are untouched. The gateway's request ids are unique
// by construction, so no call of the gateway takes that path. A second Hold
// of an id that is open is refused with ErrExists at once.
//
// # Key limits
//
// A hold with a key id of its account reserves against the key's limit as
// against the account's credit, in the same step under the same lock: Hold
// keeps each key it meets in memory with its account (keyMem: its records
// as last committed and the sum of its open holds), and admits the hold
// only if both cover it; else neither is touched. Settle adds the charge to
// the key's spend record in the transaction that takes it from the
// account. So concurrency cannot take a key past its limit any more than
// an account past its credit; an overrun can, by the same bound. A hold
// dated in a later period than the key's (a reset: daily, weekly, monthly
// in UTC) first starts that period in the ledger, spend 0, in a
// transaction of its own under the account's stripe: one per key per
// period. The first Hold of a key in a process reads it, as for an account;
// a key id that names no key of the account limits nothing (and is
// remembered as such until CreateKey). A key's open holds are never
// written: like an account's, they end with their process, and recovery
// releases them, so a new process starts with the key's Held at 0.
//
// # Memory
//
// Open sizes badger for records of a few hundred bytes and a gateway
// within 200 MB: two 8 MB memtables (each a Go-heap arena plus a log file
// mapped at twice its size), level-0 compaction at 2 tables and a write
// stall at 8, 1 MB base tables and two compactors (table builders take
// Go-heap buffers of twice the table size, and badger pools up to eight),
// no block cache (it holds only decompressed or decrypted blocks; ours are
// neither and are read in place from the mapped tables), no index cache
// (used only for encrypted tables) and 16 MB value log files. Badger writes
// new tables through a shared mapping, so a new table is wholly in the
// resident set; on Linux a store on disk unmaps each table's data blocks
// from the process's page tables within about 10 s of the table joining the
// levels (tables_linux.go), leaving them in the page cache, and a later read
// maps what it reads again.
// BenchmarkLedgerRSS measures a run of 200,000 calls.
//
// Exactly once: Settle and Release end a hold under its account's stripe,
// write done/<request id> in the transaction that charges it (checking it
// is not there), and only then remove the hold from memory, so a second
// Settle or Release finds the outcome and returns ErrAlreadySettled; a
// hold taken again on an ended id is refused when it ends (see "Holds").
// RefundJob sets the job's Refunded flag in the transaction that credits
// the refund.
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
// went with it. At start-up RecoverHolds reads the hold log segments that
// earlier processes left and releases every hold in them whose request id
// has no outcome, writing a KindRecovery journal entry (Amount 0,
// HoldAmount the hold, Note "hold released at start-up: owner <x> ended
// without settling") and an Outcome in state "recovered"; then it deletes
// the segments. It does the same for the hold/<id> keys an older build left
// in the ledger, which that build also counted in the account record's
// Held, and takes them out of it. We release rather than charge: the usage
// is unknown, and the customer must not pay for a call whose answer they
// may never have received. Until then such a hold reserves nothing: its
// credit was in the memory of the process that ended. The rule is safe
// because badger lets one process open a directory at a time, so every
// segment found at start-up belongs to a process that has ended. A
// PostgreSQL implementation shared by several replicas keeps holds in the
// database instead, and needs a liveness check per owner before applying
// it.
//
// # Export
//
// Export streams the whole ledger to a store.Sink from one read
// transaction (relay store copy feeds it to PostgreSQL's Import): accounts
// with their journal counters and alert thresholds, keys with their hashes,
// settings and spend, each account's journal in sequence order, jobs, and
// outcomes, settled ones completed from their journal entries. Open holds
// are not exported; Held (of an account, of a key) shows them. A released
// call's key, model, route and endpoint are not in store.Outcome, so they
// are not exported.
package badger
