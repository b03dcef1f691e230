// Package badger is the embedded implementation of the store contract, on
// github.com/dgraph-io/badger/v4: one process, one data directory. It is
// the store of relay demo, make run and a single relay serve.
//
// What it must not do: store a plaintext API key (only its SHA-256, see
// store.HashKey) or any prompt, completion or file content (records carry
// ids, model, route, usage numbers and amounts only); use a float for money
// (every amount is int64 nano-USD); change a balance without its journal
// entry in the same transaction; let two holds spend the same credit.
//
// Where to start reading:
//   - ledger.go: Hold, Settle and Release, the transactions and their
//     locking, exactly once, and the overrun bound.
//   - holdlog.go: why holds live in memory, and the hold log that lets
//     them survive a crash; recovery.go releases them at start-up.
//   - codec.go: the key layout and the binary record format (records.go
//     has each record's field order, recordtxn.go reads and writes them
//     in a transaction); older formats are still read.
//   - keyspend.go: key spend limits, held like an account's credit.
//   - badger.go: Open, badger's sizing for a gateway within 200 MB;
//     tables_linux.go keeps the ledger's tables out of the resident set.
//   - export.go: the books streamed out for relay store copy.
//
// The contract it implements, and the tests every store passes, are in
// package store and store/storetest.
package badger
