package main

import (
	"slices"
	"strings"

	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// Params the gateway passes (abi.Param names); each is absent when the
// client did not send the field.
const (
	paramDuration   = "duration"
	paramResolution = "resolution"
)

const (
	minDuration       = 1
	maxDuration       = 15
	defaultDuration   = 8
	defaultResolution = "480p"
)

// request is what the params say about the fee.
type request struct {
	duration   int64  // seconds, minDuration..maxDuration
	resolution string // one of resolutions
}

// parseParams validates params and returns the request they describe, with
// the defaults applied. A 400 names the param at fault. Each param may be
// given once; a param not listed above is ignored.
func parseParams(params []abi.Param) (request, *abi.Error) {
	r := request{duration: defaultDuration, resolution: defaultResolution}
	var seenDuration, seenResolution bool
	for _, prm := range params {
		switch prm.Name {
		case paramDuration:
			if seenDuration {
				return request{}, sdk.Invalid(paramDuration, "duration is given more than once")
			}
			seenDuration = true
			d, ok := sdk.ParseInt(prm.Value)
			if !ok {
				return request{}, sdk.Invalid(paramDuration, "duration must be a whole number of seconds from %d to %d (got %s)", minDuration, maxDuration, sdk.QuoteValue(prm.Value))
			}
			if d < minDuration || d > maxDuration {
				return request{}, sdk.Invalid(paramDuration, "duration must be from %d to %d seconds (got %s)", minDuration, maxDuration, sdk.QuoteValue(prm.Value))
			}
			r.duration = d
		case paramResolution:
			if seenResolution {
				return request{}, sdk.Invalid(paramResolution, "resolution is given more than once")
			}
			seenResolution = true
			if !slices.Contains(resolutions, prm.Value) {
				return request{}, sdk.Invalid(paramResolution, "resolution must be one of %s (got %s)", strings.Join(resolutions, ", "), sdk.QuoteValue(prm.Value))
			}
			r.resolution = prm.Value
		}
	}
	return r, nil
}
