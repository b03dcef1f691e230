package gateway

import (
	"context"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"golang.org/x/time/rate"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/internal/shared"
	"github.com/modelrelay/modelrelay/store"
)

// limiters holds the token buckets: one per key, one per client address for
// the public price table. With a shared Redis (sh) they are GCRA limits kept
// in Redis, so that they hold across every replica together; while Redis is
// down, each replica keeps local buckets at 1/redis.replicas of each rate
// (or refuses with 503 under redis.fail_closed).
type limiters struct {
	keyDefault config.RateConfig
	routes     map[string]config.RateConfig
	pricing    config.RateConfig

	sh *shared.Client      // nil: no Redis, local buckets at the full rate
	rl *redis_rate.Limiter // on sh

	mu    sync.Mutex
	keys  map[string]*rate.Limiter
	addrs map[string]*rate.Limiter
}

func newLimiters(cfg config.Config, sh *shared.Client) *limiters {
	l := &limiters{
		keyDefault: cfg.Limits.KeyRate,
		routes:     map[string]config.RateConfig{},
		pricing:    cfg.Limits.PricingRate,
		keys:       map[string]*rate.Limiter{},
		addrs:      map[string]*rate.Limiter{},
		sh:         sh,
	}
	if sh != nil {
		l.rl = redis_rate.NewLimiter(sh.Redis())
	}
	for _, r := range cfg.Routes {
		if r.Rate != nil {
			l.routes[r.Name] = *r.Rate
		}
	}
	return l
}

func (l *limiters) bucket(m map[string]*rate.Limiter, id string, rc config.RateConfig) *rate.Limiter {
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
func (l *limiters) allowKey(ctx context.Context, k store.Key, now time.Time) error {
	rc := l.keyDefault
	if r, ok := l.routes[k.Route]; ok {
		rc = r
	}
	return l.allow(ctx, l.keys, "key:", k.ID, rc, now, "this API key is over its rate limit")
}

// allowAddr takes one token from a client address's bucket on /api/pricing.
func (l *limiters) allowAddr(ctx context.Context, addr string, now time.Time) error {
	return l.allow(ctx, l.addrs, "addr:", addr, l.pricing, now, "too many price-table requests from this address")
}

// allow takes one token for id: from Redis while it is up, else from the
// local bucket.
func (l *limiters) allow(ctx context.Context, m map[string]*rate.Limiter, kind, id string, rc config.RateConfig, now time.Time, msg string) error {
	if l.sh == nil {
		return take(l.bucket(m, id, rc), now, msg)
	}
	if l.sh.Up() {
		cctx, cancel := l.sh.Ctx(ctx)
		res, err := l.rl.Allow(cctx, l.sh.Prefix()+kind+id, sharedLimit(rc))
		cancel()
		if err == nil {
			if res.Allowed > 0 {
				return nil
			}
			e := rateLimited(msg, int(math.Ceil(res.RetryAfter.Seconds())))
			e.RetryWait = res.RetryAfter
			return e
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.sh.Fail("rate_limit", err)
	}
	if l.sh.Config().FailClosed {
		return apierr.Refusal("shared_limits_unavailable", 1, "rate limits cannot be checked right now (the shared limit store is unavailable); retry")
	}
	// The local buckets keep their state across Redis outages: a replica
	// that falls back twice in a row does not get a fresh burst.
	return take(l.bucket(m, id, localShare(rc, l.sh.Config().Replicas)), now, msg)
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
	e.RetryWait = d
	return e
}

func rateLimited(msg string, after int) *apierr.Error {
	e := apierr.Errf(http.StatusTooManyRequests, "rate_limit_error", "rate_limited", "%s; retry in %d s", msg, max(after, 1))
	e.RetryAfter = max(after, 1)
	return e
}
