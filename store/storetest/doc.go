// Package storetest is the conformance kit of the store contract, in the
// spirit of testing/fstest: one call runs every documented behaviour of
// store.Store (store.Service and what relay serve adds) against an
// implementation, and of each optional interface the implementation claims.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Store {
//			return openMyStore(t) // a fresh, empty store
//		}, storetest.Options{
//			Crash:  crashMyStore,
//			Claims: []storetest.Capability{storetest.Exporter},
//		})
//	}
//
// Each behaviour is a subtest with a store of its own from open, which the
// kit closes when the subtest ends: credit; holds and the 402 they answer
// (*store.InsufficientError with Needed and Available; a balance at or
// below zero is always insufficient); settle exactly once per request id
// (ErrAlreadySettled, ErrNoHold); release; an overrun charged in full;
// the journal, newest first, summing exactly to the balance; keys by hash,
// ErrExists, listing and revoking; ListAccounts paging; video jobs and
// their refund exactly once; and the concurrent cases: many holds against
// scarce credit never admit more than it covers, concurrent ends of one
// hold charge it once, and concurrent creations of one account, key, job
// or hold succeed once. The Console group checks the web console's logins
// (a setup token used once, even by racing callers; expired tokens refused;
// a login bound to one account) and sessions (ended by a new password,
// purged when expired or idle). Options.Callers sets how many goroutines
// race.
//
// The optional interfaces of package store, which callers find by type
// assertion, are claimed in Options.Claims (Capability): the Capabilities
// subtest fails a store that lacks one it claims or is one it does not
// claim, so that an implementation lost to a drifted signature fails here
// rather than passing over in silence. A store that claims Exporter must
// export every record as its API shows it, in store.Sink's order; one that
// claims Allotter must keep allotments as holds that calls are carved out
// of. The subtests of an interface not claimed are skipped.
//
// How a store releases the holds of an owner that died is its own (Badger
// at RecoverHolds after reopening, PostgreSQL when their lease expires), so
// Options.Crash says how: given a store with holds open, it makes their
// owner die and returns a store on the same books whose recovery has run.
// The kit checks that such holds are released with a KindRecovery entry of
// amount 0, never charged, and that nothing stays held. Without Crash, the
// recovery subtest fails: every store recovers such holds.
//
// Amounts are integer nano-USD; every check on money is exact.
package storetest
