package gateway

import "github.com/modelrelay/modelrelay/pricing"

// Limits of the media endpoints.
const (
	// maxEditBody caps an image-edit upload; it is held in memory only.
	maxEditBody = 32 << 20
	// maxSystemOneBody is the limit on typed questions (docs/api.md#limits).
	maxSystemOneBody = 1 << 20
)

// noUsage: an image answer without a data array made nothing: charge nothing.
func noUsage(*call, []byte) pricing.Usage { return pricing.Usage{} }
