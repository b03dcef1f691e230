package apierr

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelrelay/modelrelay/store"
)

// KeyLimit is the 402 of a hold the key's spend limit refused: it says
// so (code key_limit_exceeded, never the account's insufficient_credit),
// what the call needs and what remains of the limit, and, when k is known,
// the limit, its period and when it next resets.
func KeyLimit(ie *store.InsufficientError, k *store.Key, now time.Time) *Error {
	var b strings.Builder
	fmt.Fprintf(&b, "this API key's spend limit cannot cover this call: it needs up to %s USD and the key has %s USD left",
		ie.Needed.String(), max(ie.Available, 0).String())
	if k != nil && k.Limit > 0 {
		fmt.Fprintf(&b, " of its %s USD %s", k.Limit.String(), LimitPeriod(k.Reset))
		if t, ok := NextReset(k.Reset, now); ok {
			fmt.Fprintf(&b, "; the limit resets at %s", t.Format(time.RFC3339))
		}
	}
	return Errf(http.StatusPaymentRequired, "insufficient_quota", "key_limit_exceeded", "%s", b.String())
}

// LimitPeriod names a limit by its reset period: "monthly limit", or
// "limit" for one that never resets.
func LimitPeriod(reset string) string {
	if reset == store.ResetNever {
		return "limit"
	}
	return reset + " limit"
}

// NextReset is when the period of reset that contains now ends (UTC);
// false for a limit that never resets.
func NextReset(reset string, now time.Time) (time.Time, bool) {
	start := store.PeriodStart(reset, now)
	switch reset {
	case store.ResetDaily:
		return start.AddDate(0, 0, 1), true
	case store.ResetWeekly:
		return start.AddDate(0, 0, 7), true
	case store.ResetMonthly:
		return start.AddDate(0, 1, 0), true
	}
	return time.Time{}, false
}
