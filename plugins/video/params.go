package main

import (
	"github.com/modelrelay/modelrelay/plugins/internal/param"
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
				return request{}, param.Repeated(paramDuration)
			}
			seenDuration = true
			d, aerr := param.Int(paramDuration, prm.Value, minDuration, maxDuration, "a whole number of seconds", "seconds")
			if aerr != nil {
				return request{}, aerr
			}
			r.duration = d
		case paramResolution:
			if seenResolution {
				return request{}, param.Repeated(paramResolution)
			}
			seenResolution = true
			if aerr := param.OneOf(paramResolution, prm.Value, resolutions); aerr != nil {
				return request{}, aerr
			}
			r.resolution = prm.Value
		}
	}
	return r, nil
}
