package billing

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelrelay/modelrelay/pricing"
)

// metrics are the ledger's series; the gateway registers them on its
// registry (Collectors).
type metrics struct {
	tokens    *prometheus.CounterVec // model, route, kind
	charged   *prometheus.CounterVec // model, route: nano-USD
	openHolds atomic.Int64

	// settleFallback counts calls charged by the settle fallback: plugin,
	// reason (plugin_error, negative_charge), fallback (published_price,
	// none).
	settleFallback *prometheus.CounterVec
	// storeRetries counts tries of a settle, release, carve, fallback hold
	// or video job record made again because the store was unavailable: op.
	storeRetries *prometheus.CounterVec
	// storeDur times the ledger's steps on the request path: a hold, which
	// the call waits for before it goes upstream, a carve out of an
	// allotment (allot.go), which it does not, and a settle.
	storeDur                     *prometheus.HistogramVec // op (hold|carve|settle)
	holdDur, carveDur, settleDur prometheus.Observer      // its series
	// uncharged counts calls answered whose charge could not be written
	// (storewrites.go): 0 unless something is wrong.
	uncharged atomic.Uint64
}

func newMetrics() *metrics {
	m := &metrics{}
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "relay_tokens_total", Help: "Tokens settled, by model, route and kind (input, cache_read, cache_write, cache_write_1h, output).",
	}, []string{"model", "route", "kind"})
	m.charged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "relay_charged_nano_usd_total", Help: "Nano-USD charged (settled calls, net of nothing: refunds are separate journal entries).",
	}, []string{"model", "route"})
	m.settleFallback = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "relay_settle_fallback_total", Help: "Calls whose plugin could not price the usage (after a retry on a fresh instance), charged by the fallback: the usage at the published price, or nothing when that cannot be computed.",
	}, []string{"plugin", "reason", "fallback"})
	m.storeRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "relay_store_retries_total", Help: "Settles, releases, carves, holds of calls whose allotment is gone and video job records (op: settle, release, carve, hold, job) tried again because the store was unavailable (a database that is down), under one budget (relay_store_retry_budget); a call answered meanwhile is charged once it is back.",
	}, []string{"op"})
	m.storeDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "relay_store_duration_seconds", Help: "Time the ledger took to hold (before the call goes upstream), to carve a call's hold out of an allotment (beside it; the call waits only before its settle) and to settle, as the gateway waits for it: on PostgreSQL a round trip and a commit, and the wait for the batch ahead.",
		Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, .5, 2.5},
	}, []string{"op"})
	m.holdDur, m.carveDur, m.settleDur = m.storeDur.WithLabelValues("hold"), m.storeDur.WithLabelValues("carve"), m.storeDur.WithLabelValues("settle")
	return m
}

// Collectors are the ledger's series, for the gateway's registry: what the
// settled calls consumed and were charged, the holds open, the settle
// fallback, and the ledger's writes (storewrites.go).
func (l *Ledger) Collectors() []prometheus.Collector {
	m := l.met
	return []prometheus.Collector{
		m.tokens, m.charged, m.settleFallback, m.storeRetries, m.storeDur,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_open_holds", Help: "Holds taken by this process and not yet settled or released.",
		}, func() float64 { return float64(m.openHolds.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "relay_calls_uncharged_total", Help: "Calls answered whose charge could not be written: the gateway stopped before the store answered, or the store refused the write for good. 0 unless something is wrong; the error log names each.",
		}, func() float64 { return float64(m.uncharged.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_store_backlog", Help: "Ledger writes under way: holds, carves, settles and releases waiting in the store's queue or being sent (billing.max_store_backlog).",
		}, func() float64 { return float64(l.writes.State(time.Now()).Writes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_store_backlog_age_seconds", Help: "How long the oldest ledger write under way has waited (billing.max_store_wait).",
		}, func() float64 { return l.writes.State(time.Now()).Oldest.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "relay_store_behind_refused_total", Help: "Relayed calls refused with 503 store_unavailable because the ledger's writes were behind: at admission, before any work (billing.max_store_backlog, billing.max_store_wait), or when their hold waited in the store's queue past billing.max_store_wait.",
		}, func() float64 { return float64(l.writes.Refused()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_store_retrying", Help: "Ledger writes waiting to be tried again after the store answered that it is unavailable.",
		}, func() float64 { return float64(l.retrier.Waiting()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_store_retry_budget", Help: "Ledger writes per second the replica's shared retry budget lets be tried again now: it halves on each retry the store does not answer and doubles on each it does.",
		}, l.retrier.Budget),
	}
}

// observeSettle records what a settled call consumed and was charged.
func (m *metrics) observeSettle(model, route string, u pricing.Usage, charge pricing.Nano) {
	for _, t := range []struct {
		kind string
		n    int64
	}{{"input", u.InputTokens}, {"cache_read", u.CacheReadTokens}, {"cache_write", u.CacheWriteTokens},
		{"cache_write_1h", u.CacheWrite1hTokens}, {"output", u.OutputTokens}} {
		if t.n > 0 {
			m.tokens.WithLabelValues(model, route, t.kind).Add(float64(t.n))
		}
	}
	if charge > 0 {
		m.charged.WithLabelValues(model, route).Add(float64(charge))
	}
}
