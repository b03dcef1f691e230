package gateway

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/modelrelay/modelrelay/gateway/apierr"
)

// metrics are the series an operator watches, on a registry of the
// gateway's own (so several gateways in one process do not collide).
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec   // endpoint, model, route, status
	latency   *prometheus.HistogramVec // endpoint, part (gateway|upstream)
	ttfb      *prometheus.HistogramVec // endpoint
	pluginDur *prometheus.HistogramVec // plugin, op
}

// latencyBuckets resolve the sub-millisecond overhead as well as long calls.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

func newMetrics(g *Gateway) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "relay_requests_total", Help: "Requests by endpoint, model, route and status.",
	}, []string{"endpoint", "model", "route", "status"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "relay_request_duration_seconds", Help: "Request latency split into the gateway's own time and the upstream's time to response headers.", Buckets: latencyBuckets,
	}, []string{"endpoint", "part"})
	m.ttfb = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "relay_stream_first_byte_seconds", Help: "Time from request to the first event written to the client, for streams.", Buckets: latencyBuckets,
	}, []string{"endpoint"})
	m.pluginDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "relay_plugin_call_duration_seconds", Help: "Plugin call durations as the gateway sees them (including waiting for an instance).",
		Buckets: []float64{.000005, .00001, .000025, .00005, .0001, .00025, .0005, .001, .005, .025, .1, .5},
	}, []string{"plugin", "op"})
	m.reg.MustRegister(m.requests, m.latency, m.ttfb, m.pluginDur,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "relay_overload_queue_delay_seconds", Help: "How long the gateway's goroutines waited for a CPU: the 99th percentile of the last 25 ms window measured (limits.overload_delay).",
	}, func() float64 { return g.shed.queueDelay().Seconds() }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "relay_overload_shed_share", Help: "The share of new relayed calls refused with 503 overloaded now, from 0 to 0.95.",
	}, g.shed.share))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "relay_overload_shed_total", Help: "Relayed calls refused with 503 overloaded, before any work was done for them.",
	}, func() float64 { return float64(g.shed.shed.Load()) }))
	m.reg.MustRegister(g.lines.Collectors()...)
	m.reg.MustRegister(g.bill.Collectors()...) // the ledger's (package billing)
	m.reg.MustRegister(&pluginCollector{g: g}, &alertCollector{g: g})
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// observeRequest records one finished request.
func (m *metrics) observeRequest(endpoint string, info *reqInfo, status int, total time.Duration) {
	m.requests.WithLabelValues(endpoint, info.model, info.route, strconv.Itoa(status)).Inc()
	up := info.upstream
	if up > total {
		up = total
	}
	m.latency.WithLabelValues(endpoint, "gateway").Observe((total - up).Seconds())
	if info.line != "" {
		m.latency.WithLabelValues(endpoint, "upstream").Observe(up.Seconds())
	}
	if info.ttfb > 0 {
		m.ttfb.WithLabelValues(endpoint).Observe(info.ttfb.Seconds())
	}
}

// pluginCollector reports the plugin pools at scrape time.
type pluginCollector struct{ g *Gateway }

var (
	poolInstDesc = prometheus.NewDesc("relay_plugin_pool_instances", "Live instances per plugin.", []string{"plugin"}, nil)
	poolIdleDesc = prometheus.NewDesc("relay_plugin_pool_idle", "Idle instances per plugin.", []string{"plugin"}, nil)
	poolCallDesc = prometheus.NewDesc("relay_plugin_calls_total", "Calls per plugin.", []string{"plugin"}, nil)
	poolFailDesc = prometheus.NewDesc("relay_plugin_failures_total", "Failed calls (trap, timeout, malformed, a refused settle) per plugin.", []string{"plugin"}, nil)
	parkedDesc   = prometheus.NewDesc("relay_plugin_parked", "1 while a plugin is parked for want of calls (plugins.idle_release), else 0.", []string{"plugin"}, nil)
	unparksDesc  = prometheus.NewDesc("relay_plugin_unparks_total", "Calls that had to load a parked plugin again.", []string{"plugin"}, nil)
)

func (c *pluginCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolInstDesc
	ch <- poolIdleDesc
	ch <- poolCallDesc
	ch <- poolFailDesc
	ch <- parkedDesc
	ch <- unparksDesc
}

func (c *pluginCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.g.host.Stats() {
		ch <- prometheus.MustNewConstMetric(poolInstDesc, prometheus.GaugeValue, float64(s.Instances), s.Plugin)
		ch <- prometheus.MustNewConstMetric(poolIdleDesc, prometheus.GaugeValue, float64(s.Idle), s.Plugin)
		ch <- prometheus.MustNewConstMetric(poolCallDesc, prometheus.CounterValue, float64(s.Calls), s.Plugin)
		ch <- prometheus.MustNewConstMetric(poolFailDesc, prometheus.CounterValue, float64(s.Failures), s.Plugin)
		parked := 0.0
		if s.Parked {
			parked = 1
		}
		ch <- prometheus.MustNewConstMetric(parkedDesc, prometheus.GaugeValue, parked, s.Plugin)
		ch <- prometheus.MustNewConstMetric(unparksDesc, prometheus.CounterValue, float64(s.Unparks), s.Plugin)
	}
}

// alertCollector reports the accounts under their low-balance threshold
// (store.AccountsBelowAlert) at scrape time. The count is read at most
// once per alertCacheTTL and within alertTimeout, one scrape at a time, so
// a storm of scrapes costs the store one count per TTL on each replica.
// While the store cannot answer, the series is absent (alert on absent()).
type alertCollector struct {
	g  *Gateway
	mu sync.Mutex
	at time.Time // when n was read; zero: never
	n  int
	ok bool // the last read succeeded
}

const (
	alertCacheTTL = 5 * time.Second
	alertTimeout  = 2 * time.Second
)

var belowAlertDesc = prometheus.NewDesc("relay_accounts_below_alert",
	"Accounts whose available credit (balance minus open holds) is under their low-balance threshold (relay accounts update -alert-below-usd), counted by the store at most every 5 s.", nil, nil)

func (c *alertCollector) Describe(ch chan<- *prometheus.Desc) { ch <- belowAlertDesc }

func (c *alertCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if c.at.IsZero() || time.Since(c.at) >= alertCacheTTL {
		ctx, cancel := context.WithTimeout(context.Background(), alertTimeout)
		n, err := c.g.store.AccountsBelowAlert(ctx)
		cancel()
		c.at, c.n, c.ok = time.Now(), n, err == nil
		if err != nil {
			c.g.log.Warn("count accounts below their alert", "error", apierr.Bound(err.Error(), apierr.MaxMessage))
		}
	}
	n, ok := c.n, c.ok
	c.mu.Unlock()
	if ok {
		ch <- prometheus.MustNewConstMetric(belowAlertDesc, prometheus.GaugeValue, float64(n))
	}
}
