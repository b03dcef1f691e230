package sdk

import "strconv"

// QuoteValue quotes a client's value for an error message (strconv.Quote),
// cut to its first 40 bytes and marked "…" when longer, so that a hostile
// value cannot bloat the error.
func QuoteValue(s string) string {
	const limit = 40
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "…"
	}
	return strconv.Quote(s)
}
