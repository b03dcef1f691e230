package gateway

import (
	"math"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/modelrelay/modelrelay/store"
)

// limiters holds the token buckets: one per key, one per client address for
// the public price table.
type limiters struct {
	keyDefault RateConfig
	routes     map[string]RateConfig
	pricing    RateConfig

	mu    sync.Mutex
	keys  map[string]*rate.Limiter
	addrs map[string]*rate.Limiter
}

func newLimiters(cfg Config) *limiters {
	l := &limiters{
		keyDefault: cfg.Limits.KeyRate,
		routes:     map[string]RateConfig{},
		pricing:    cfg.Limits.PricingRate,
		keys:       map[string]*rate.Limiter{},
		addrs:      map[string]*rate.Limiter{},
	}
	for _, r := range cfg.Routes {
		if r.Rate != nil {
			l.routes[r.Name] = *r.Rate
		}
	}
	return l
}

func (l *limiters) bucket(m map[string]*rate.Limiter, id string, rc RateConfig) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := m[id]
	if !ok {
		if len(m) > 200_000 { // bound memory under address churn
			clear(m)
		}
		b = rate.NewLimiter(rate.Limit(rc.Rate), rc.Burst)
		m[id] = b
	}
	return b
}

// allowKey takes one token from the key's bucket → 429 with Retry-After.
func (l *limiters) allowKey(k store.Key, now time.Time) error {
	rc := l.keyDefault
	if r, ok := l.routes[k.Route]; ok {
		rc = r
	}
	return take(l.bucket(l.keys, k.ID, rc), now, "this API key is over its rate limit")
}

// allowAddr takes one token from a client address's bucket on /api/pricing.
func (l *limiters) allowAddr(addr string, now time.Time) error {
	return take(l.bucket(l.addrs, addr, l.pricing), now, "too many price-table requests from this address")
}

func take(b *rate.Limiter, now time.Time, msg string) error {
	r := b.ReserveN(now, 1)
	if !r.OK() {
		return rateLimited(msg, 1)
	}
	d := r.DelayFrom(now)
	if d == 0 {
		return nil
	}
	r.CancelAt(now)
	e := rateLimited(msg, int(math.Ceil(d.Seconds())))
	e.retryWait = d
	return e
}

func rateLimited(msg string, after int) *Error {
	e := errf(http.StatusTooManyRequests, "rate_limit_error", "rate_limited", "%s; retry in %d s", msg, max(after, 1))
	e.RetryAfter = max(after, 1)
	return e
}
