package console

import (
	"slices"
	"strconv"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// chartDays is how many UTC days the spend chart covers, today included.
const chartDays = 30

// spend sums the charges (less refunds) of entries per UTC day and model:
// exact Nano. keyID "" counts every key.
type spend struct {
	from   time.Time                          // 00:00 UTC of the first day
	byDay  [chartDays]map[string]pricing.Nano // model → spend
	totals map[string]pricing.Nano            // model → spend over the days
}

func newSpend(now time.Time) *spend {
	y, m, d := now.UTC().Date()
	s := &spend{from: time.Date(y, m, d-chartDays+1, 0, 0, 0, 0, time.UTC), totals: map[string]pricing.Nano{}}
	for i := range s.byDay {
		s.byDay[i] = map[string]pricing.Nano{}
	}
	return s
}

// to is the end of the chart's range (00:00 UTC after today).
func (s *spend) to() time.Time { return s.from.AddDate(0, 0, chartDays) }

// add counts e when it is a charge or refund of keyID ("" any key).
func (s *spend) add(e store.Entry, keyID string) {
	if (e.Kind != store.KindCharge && e.Kind != store.KindRefund) || (keyID != "" && e.KeyID != keyID) {
		return
	}
	day := int(e.Time.UTC().Sub(s.from) / (24 * time.Hour))
	if e.Time.Before(s.from) || day >= chartDays {
		return
	}
	s.byDay[day][e.Model] -= e.Amount // a charge's amount is negative
	s.totals[e.Model] -= e.Amount
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH     = 784, 260
	padL, padR         = 96, 12 // padL fits a label such as "$0.0000375"
	padT, padB         = 12, 40
	plotW, plotH       = chartW - padL - padR, chartH - padT - padB
	legendRow, nColors = 22, 8
)

// chartView is what the template draws: bars with exact sums, geometry in
// float only for pixels.
type chartView struct {
	Width, Height int
	Bars          []chartBar
	Ticks         []chartTick
	Days          []chartDay
	Legend        []chartLegend
	PlotX, PlotY  int
	PlotW, PlotH  int
	PlotBottom    int
	Empty         bool
	LegendHeight  int
}

type chartBar struct {
	Model, Day, USD string
	Class           string
	X, Y, W, H      string
}

type chartTick struct {
	Y     string
	Label string
}

type chartDay struct {
	X, Label string
}

type chartLegend struct {
	Model, Class, Total string
	Y, TextY            int
}

// view lays the sums out as stacked bars: models in order of total spend,
// a colour class each (cycled past nColors), a y axis rounded up to a
// 1-2-5 step.
func (s *spend) view() chartView {
	models := make([]string, 0, len(s.totals))
	for m, t := range s.totals {
		if t != 0 {
			models = append(models, m)
		}
	}
	slices.SortFunc(models, func(a, b string) int {
		if s.totals[a] != s.totals[b] {
			if s.totals[a] > s.totals[b] {
				return -1
			}
			return 1
		}
		if a < b {
			return -1
		}
		return 1
	})
	class := map[string]string{}
	v := chartView{Width: chartW, PlotX: padL, PlotY: padT, PlotW: plotW, PlotH: plotH, PlotBottom: padT + plotH}
	for i, m := range models {
		class[m] = "c" + strconv.Itoa(i%nColors)
		v.Legend = append(v.Legend, chartLegend{Model: m, Class: class[m], Total: s.totals[m].String(),
			Y: chartH + i*legendRow, TextY: chartH + i*legendRow + 12})
	}
	v.LegendHeight = len(models) * legendRow
	v.Height = chartH + v.LegendHeight
	var peak pricing.Nano
	for _, day := range s.byDay {
		var t pricing.Nano
		for _, n := range day {
			t += max(n, 0)
		}
		peak = max(peak, t)
	}
	v.Empty = peak == 0
	top := niceCeil(peak)
	for i := 0; i <= 4; i++ {
		n := top / 4 * pricing.Nano(i)
		v.Ticks = append(v.Ticks, chartTick{Y: px(float64(padT+plotH) - float64(plotH)*frac(n, top)), Label: "$" + n.String()})
	}
	slot := float64(plotW) / chartDays
	for i, day := range s.byDay {
		d := s.from.AddDate(0, 0, i)
		x := float64(padL) + slot*float64(i)
		if i%5 == 0 || i == chartDays-1 {
			v.Days = append(v.Days, chartDay{X: px(x + slot/2), Label: d.Format("Jan 2")})
		}
		base := float64(padT + plotH)
		for _, m := range models {
			n := day[m]
			if n <= 0 {
				continue
			}
			h := float64(plotH) * frac(n, top)
			base -= h
			v.Bars = append(v.Bars, chartBar{Model: m, Day: d.Format("2006-01-02"), USD: n.String(), Class: class[m],
				X: px(x + 1), Y: px(base), W: px(slot - 2), H: px(max(h, 0.5))})
		}
	}
	return v
}

// niceCeil rounds n up to 1, 2 or 5 times a power of ten nano-USD, at
// least 100 (so that a day of a few tiny calls still draws a bar); each
// is divisible by 4, for the ticks.
func niceCeil(n pricing.Nano) pricing.Nano {
	step := pricing.Nano(100)
	for {
		for _, f := range []pricing.Nano{1, 2, 5} {
			if c := step * f; c >= n && c%4 == 0 {
				return c
			}
		}
		if step > pricing.Nano(1)<<60/10 {
			return n
		}
		step *= 10
	}
}

func frac(n, of pricing.Nano) float64 {
	if of <= 0 {
		return 0
	}
	return float64(n) / float64(of)
}

func px(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }
