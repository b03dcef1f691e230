package main

import (
	"math"
	"strconv"
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
			d, ok := parseInt(prm.Value)
			if !ok {
				return request{}, sdk.Invalid(paramDuration, "duration must be a whole number of seconds from %d to %d (got %s)", minDuration, maxDuration, quote(prm.Value))
			}
			if d < minDuration || d > maxDuration {
				return request{}, sdk.Invalid(paramDuration, "duration must be from %d to %d seconds (got %s)", minDuration, maxDuration, quote(prm.Value))
			}
			r.duration = d
		case paramResolution:
			if seenResolution {
				return request{}, sdk.Invalid(paramResolution, "resolution is given more than once")
			}
			seenResolution = true
			if !contains(resolutions, prm.Value) {
				return request{}, sdk.Invalid(paramResolution, "resolution must be one of %s (got %s)", strings.Join(resolutions, ", "), quote(prm.Value))
			}
			r.resolution = prm.Value
		}
	}
	return r, nil
}

// parseInt parses an optionally negative decimal integer (digits only: no
// plus sign, fraction or exponent). A value beyond int64 saturates, so that
// it is reported as out of range rather than as malformed.
func parseInt(s string) (int64, bool) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil { // digits only, so the error is a range error
		if s[0] == '-' {
			return math.MinInt64, true
		}
		return math.MaxInt64, true
	}
	return v, true
}

// quote quotes a client's value for an error message, cut to 40 bytes so
// that a hostile value cannot bloat the error.
func quote(s string) string {
	const limit = 40
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "…"
	}
	return strconv.Quote(s)
}
