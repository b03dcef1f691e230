package main

import (
	"strconv"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

// FuzzParams: whatever the client sent as duration and resolution,
// parseParams either accepts 1 to 15 seconds at a known resolution, or
// refuses with a 400 naming one of the two; admit then holds exactly
// seconds × the resolution's price and sets both effective values.
func FuzzParams(f *testing.F) {
	for _, d := range []string{"1", "8", "15", "0", "16", "-1", "7.5", "", "08", "99999999999999999999", "-"} {
		f.Add(true, d, true, "720p")
	}
	f.Add(false, "", false, "")
	f.Add(true, "15", true, "1080P")
	p := configured(f)
	perSecond := map[string]int64{"480p": 50_000_000, "720p": 100_000_000, "1080p": 200_000_000}
	f.Fuzz(func(t *testing.T, hasDuration bool, duration string, hasResolution bool, resolution string) {
		var list []abi.Param
		if hasDuration {
			list = append(list, abi.Param{Name: "duration", Value: duration})
		}
		if hasResolution {
			list = append(list, abi.Param{Name: "resolution", Value: resolution})
		}
		r, err := parseParams(list)
		if err != nil {
			if err.Code != abi.CodeInvalid || (err.Field != "duration" && err.Field != "resolution") || len(err.Message) > 300 {
				t.Fatalf("error %+v", err)
			}
			return
		}
		if r.duration < 1 || r.duration > 15 {
			t.Fatalf("duration %d accepted", r.duration)
		}
		if d, _ := strconv.ParseInt(duration, 10, 64); hasDuration && d != r.duration || !hasDuration && r.duration != 8 {
			t.Fatalf("duration %q (given %v) → %d", duration, hasDuration, r.duration)
		}
		if hasResolution && r.resolution != resolution || !hasResolution && r.resolution != "480p" {
			t.Fatalf("resolution %q (given %v) → %q", resolution, hasResolution, r.resolution)
		}
		res, aerr := p.admit(abi.AdmitRequest{Endpoint: "video_generation", Model: model, Route: "standard", Params: list})
		want := perSecond[r.resolution] * r.duration
		if aerr != nil || res.Hold != want || len(res.Set) != 2 || res.Set[0].Value != strconv.FormatInt(r.duration, 10) || res.Set[1].Value != r.resolution {
			t.Fatalf("admit = %+v, %v; want hold %d", res, aerr, want)
		}
	})
}
