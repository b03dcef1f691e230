// Package billing is the money path of a relayed call: the hold of its
// quote, then its settle or release, exactly once, over the store's
// ledger.
//
// The gateway calls it in order:
//
//	Ledger.Admit      refuse a call at once while the ledger is behind
//	Ledger.Hold       hold the quote (402 when the credit or the key's limit refuses)
//	Ticket.Wait       the hold's outcome, when it went beside the upstream request
//	Ticket.Price      price the usage with the model's plugin (the fallback charge if it cannot)
//	Ticket.Answering  a JSON answer goes out before its settle
//	Ticket.SettleAnswered / Ticket.Settle
//	Ticket.Finish     deferred: release a hold left unsettled
//
// and reads through Ledger.WaitSettled and Ledger.WaitStream, so that a
// read made after an answer shows its charge.
//
// Behind that small API: holds that go beside the upstream request
// (overlap.go), calls admitted in memory against allotments (allot.go),
// the ledger's write backlog and its retries (storewrites.go, over
// gateway/backlog), settles left to the background and the per-account
// registry the reads wait on (settling.go, and shared.go across replicas).
//
// Sending upstream is not billing's concern: where a hold goes beside the
// upstream request, Hold returns it pending, with the context the request
// is sent with (it ends when the hold is refused), and the gateway waits
// for it before any of the answer reaches the client. The quote stays in
// the gateway: it is the plugin's validation of the request (a 400 names
// the field) and decides the body sent upstream (the plugin's Set), so it
// belongs with the request's admission; billing receives its amount.
//
// Money is integer nano-USD (pricing.Nano) throughout; nothing here is
// priced in floating point. The package must not import the gateway: it
// learns of a call only what Call says.
package billing
