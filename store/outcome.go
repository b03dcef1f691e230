package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
)

// Outcome states: how a hold ended.
const (
	OutcomeSettled   = "settled"   // Settle charged the call
	OutcomeReleased  = "released"  // Release dropped it (the call failed)
	OutcomeRecovered = "recovered" // RecoverHolds dropped it at start-up
)

// Outcome is the audit record of a hold that ended, kept under its request
// id for as long as the store lives. It is what makes Settle and Release
// exactly-once, and it is the only trace a released hold leaves (a release
// writes no journal entry because it moves no money).
type Outcome struct {
	RequestID  string
	Account    string
	State      string       // OutcomeSettled, OutcomeReleased or OutcomeRecovered
	HoldAmount pricing.Nano // the amount the hold reserved
	Charge     pricing.Nano // what Settle charged; 0 otherwise
	Seq        uint64       // the journal entry's sequence number; 0 for a release
	Owner      string       // the process that took the hold; not kept for a settled call
	Reason     string       // Release's reason, Settle's note, or the recovery note
	Time       time.Time
}

// RecoveryNote is the note of the KindRecovery entry of a hold owned by
// owner.
func RecoveryNote(owner string) string {
	return "hold released at start-up: owner " + owner + " ended without settling"
}

// AuditReport is one account's books, read in one consistent snapshot.
type AuditReport struct {
	Account     Account
	Entries     int
	LastSeq     uint64       // the last entry's sequence number
	Credits     pricing.Nano // Σ KindCredit amounts
	Charges     pricing.Nano // Σ KindCharge amounts, as a positive number
	Refunds     pricing.Nano // Σ KindRefund amounts
	Journal     pricing.Nano // Σ every entry's signed amount
	OpenHolds   int
	HeldByHolds pricing.Nano // Σ the open holds' amounts
	Problems    []string     // every broken invariant; empty when the books hold
}

// Err is nil when the books hold, or an error listing every problem.
func (r AuditReport) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	errs := make([]error, len(r.Problems))
	for i, p := range r.Problems {
		errs[i] = errors.New(p)
	}
	return fmt.Errorf("store: audit of account %q: %w", r.Account.ID, errors.Join(errs...))
}
