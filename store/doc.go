// Package store is the contract of ModelRelay's books: prepaid accounts and
// their balances, API keys (by hash), holds taken at admission, the journal
// of credits, charges, refunds and recoveries, video jobs, and the web
// console's logins and sessions. store.go has the types, errors and
// interfaces (Ledger, Keys, Jobs; Service, all that the gateway serves
// calls with; Store, Service and what relay serve and crash recovery use;
// the optional Allotter); console.go the Console contract, setup tokens and
// email rules; ids.go the rules for ids, notes, keys, holds and jobs;
// keygen.go how API keys are made and hashed; export.go the Sink and
// Exporter through which the books of one store are read out, in a fixed
// order, to be copied into another (relay store copy).
//
// Two packages implement it: store/badger, embedded (one process), and
// store/postgres, shared by any number of replicas. store/storetest is the
// conformance kit both pass: read it to learn what the contract promises.
//
// What no implementation may do: store a plaintext API key or setup token
// (only HashKey of it), a password (only the console's KDF hash) or any
// prompt, completion or file content (entries, holds and jobs carry ids,
// model, route, usage numbers and amounts only); use a float for money
// (every amount is int64 nano-USD); change a balance without its journal
// entry in the same transaction; let two holds reserve the same credit.
//
// The overrun bound. Settle takes the charge in full even above the hold;
// that is the only way a balance goes below zero. Hold refuses any hold
// while the balance is at or below zero and otherwise admits only what
// Available (balance − open holds) covers, so a negative balance is at most
// the sum of the overruns of the calls that were in flight together.
package store
