// Package postgres keeps the ledger in PostgreSQL (15 or later), shared by
// any number of gateway replicas. It implements the store contract
// (store.Store: the ledger, keys and their limits, the books holders read,
// video jobs, the web console's logins and sessions) plus what start-up
// recovery needs (RecoverHolds, OpenHolds, Owner).
//
// What it must not do: store a plaintext API key or any caller content; use
// a float for money (amounts are bigint nano-USD); change a balance without
// its journal entry in the same statement; decide on a value read by an
// earlier statement (each money step is one statement, so READ COMMITTED is
// enough); commit a hold asynchronously.
//
// Where to start reading:
//   - postgres.go: Open, the options, isolation and how copies are made.
//   - ledger.go: Hold, Settle and Release as single statements, and the
//     late settle of a hold a sweep recovered; reads.go the ledger's reads.
//   - holds.go: hold leases renewed while their calls are alive, and the
//     sweep that releases a dead replica's holds.
//   - batch.go: one batch of holds and settles in flight per account.
//   - migrate.go and migrations/: the schema, applied at Open.
//   - import.go and export.go: relay store copy.
//   - console.go: console logins (a setup token used by one conditional
//     UPDATE) and sessions.
//
// pgtest gives any package's tests a database of its own.
package postgres
