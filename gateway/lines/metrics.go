package lines

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
)

// metrics are the series the retry loop updates as it goes; the rest are
// read at scrape time (Collectors).
type metrics struct {
	// panicCalls counts calls sent on in panic mode: route, model.
	panicCalls *prometheus.CounterVec
	// waited429 counts the waits for a provider's short 429 (retry.max_429_wait).
	waited429 prometheus.Counter
	// cooldowns counts the 429s with a wait that made a line cool on every
	// replica (cooldown.go): line.
	cooldowns *prometheus.CounterVec
}

func newMetrics() metrics {
	return metrics{
		panicCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_panic_calls_total", Help: "Calls sent to the least-bad lines while every line serving them was open (retry.panic_share).",
		}, []string{"route", "model"}),
		waited429: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "relay_upstream_429_waited_total", Help: "Waits for a provider's 429 Retry-After (retry.max_429_wait) before trying the line again, instead of passing the 429 on.",
		}),
		cooldowns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_line_cooldowns_total", Help: "A provider's 429 with a wait that every replica sharing the Redis skips the line for.",
		}, []string{"line"}),
	}
}

// Collectors are the lines' series, for the gateway's registry: the
// counters above, the affinity map's size, the retry budget's refusals
// and, per line, its breaker's state, tries and failures.
func (s *Set) Collectors() []prometheus.Collector {
	cs := []prometheus.Collector{s.met.cooldowns, s.met.panicCalls, s.met.waited429}
	if s.affinity != nil {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_affinity_conversations", Help: "Conversations whose line is remembered (retry.affinity_ttl; at most 100,000).",
		}, func() float64 { return float64(s.affinity.len()) }))
	}
	cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "relay_retry_budget_refused_total", Help: "Retries not made because the retry budget was spent (retry.budget_ratio): the call answered with its last failure.",
	}, func() float64 { return float64(s.budget.refused.Load()) }))
	return append(cs, &lineCollector{s: s})
}

// lineCollector reports each line's breaker and counts at scrape time.
type lineCollector struct{ s *Set }

var (
	breakerDesc = prometheus.NewDesc("relay_line_breaker_state", "Circuit breaker state per line: 0 closed, 1 half-open, 2 open.", []string{"line", "route"}, nil)
	lineReqDesc = prometheus.NewDesc("relay_line_requests_total", "Upstream attempts per line.", []string{"line"}, nil)
	lineErrDesc = prometheus.NewDesc("relay_line_failures_total", "Failed upstream attempts per line.", []string{"line"}, nil)
)

func (c *lineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- breakerDesc
	ch <- lineReqDesc
	ch <- lineErrDesc
}

func (c *lineCollector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c.s.all {
		st := 0.0
		switch l.breaker.State() {
		case gobreaker.StateHalfOpen:
			st = 1
		case gobreaker.StateOpen:
			st = 2
		}
		ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, st, l.cfg.Name, l.cfg.Route)
		l.mu.Lock()
		req, fail := l.requests, l.failed
		l.mu.Unlock()
		ch <- prometheus.MustNewConstMetric(lineReqDesc, prometheus.CounterValue, float64(req), l.cfg.Name)
		ch <- prometheus.MustNewConstMetric(lineErrDesc, prometheus.CounterValue, float64(fail), l.cfg.Name)
	}
}
