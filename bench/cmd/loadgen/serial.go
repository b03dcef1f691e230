package main

import (
	"context"
	"fmt"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// SerialRun is one call at a time, as fast as one connection goes: the
// added latency third-party harnesses measure, where no call waits behind
// another.
type SerialRun struct {
	Target  string   `json:"target"`
	Round   int      `json:"round"`
	Lat     Lat      `json:"latency"`
	Calls   uint64   `json:"calls"`
	PerS    float64  `json:"per_s"`
	Success float64  `json:"success"`
	Stolen  *float64 `json:"sut_stolen,omitempty"`
	Errors  []string `json:"errors,omitempty"`
}

// serial: every target, every round, one worker on one connection for Duration.
func (b *bench) serial(ctx context.Context, targets []target, res *Results) {
	for round := 1; round <= b.s.Rounds; round++ {
		for _, t := range order(targets, round) {
			if ctx.Err() != nil {
				return
			}
			c := newClient(1, 1, b.s.Timeout)
			if b.s.Warmup > 0 {
				b.attack(ctx, c, t, vegeta.Rate{}, b.s.Warmup, 1, 1, false)
			}
			stolen := b.stolen()
			m := b.attack(ctx, c, t, vegeta.Rate{}, b.s.Duration, 1, 1, false)
			c.CloseIdleConnections()
			r := SerialRun{Target: t.Name, Round: round, Lat: m.lat(), Calls: m.all.Requests, PerS: m.all.Throughput,
				Success: m.all.Success, Stolen: stolen(), Errors: firstErrors(m.all.Errors)}
			res.Serial = append(res.Serial, r)
			b.logf("serial round %d %-10s p50 %v p99 %v, %.0f calls/s", round, t.Name, r.Lat.P50, r.Lat.P99, r.PerS)
			b.pause(ctx)
		}
	}
}

// aggSerial is the median over rounds of name's serial runs.
func aggSerial(runs []SerialRun, name string) (l Lat, perS float64, ok bool) {
	var ls []Lat
	var ps []float64
	for _, r := range runs {
		if r.Target == name {
			ls, ps = append(ls, r.Lat), append(ps, r.PerS)
		}
	}
	if len(ls) == 0 {
		return Lat{}, 0, false
	}
	return medianLat(ls), median(ps), true
}

// renderSerial is the concurrency-1 table: each hop's p50 and p99 over the
// provider's own, the gateways' beside the bare proxy's.
func renderSerial(p func(string, ...any), res *Results) {
	if len(res.Serial) == 0 {
		return
	}
	s := res.Settings
	p("### One call at a time\n\n")
	p("One connection, each call sent when the last is answered, %v per target after a %v warm-up: the added latency as third-party "+
		"harnesses measure it, no call waiting behind another. Added = hop − direct at the same percentile.\n\n", s.Duration, s.Warmup)
	p("| target | p50 | p99 | calls/s | added p50 | added p99 |\n|---|---:|---:|---:|---:|---:|\n")
	d, _, dok := aggSerial(res.Serial, "direct")
	for _, name := range targetNames {
		l, perS, ok := aggSerial(res.Serial, name)
		if !ok {
			continue
		}
		add := "— | —"
		if name != "direct" && dok {
			o := l.sub(d)
			add = fmt.Sprintf("%s | %s", signedMs(o.P50), signedMs(o.P99))
		}
		p("| %s | %s | %s | %.0f | %s |\n", name, ms(l.P50), ms(l.P99), perS, add)
	}
	p("\n")
}
