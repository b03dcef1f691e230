package gateway

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/modelrelay/modelrelay/gateway/config"
)

// What replicas share through Redis (package shared), when redis.url is
// set: the rate limits (limits.go), key cache invalidations, upstream
// cooldowns after a 429 and (package billing) the calls answered but not
// yet settled, for read-after-answer on any replica. Each falls back to this process's own
// view while Redis is down; the ledger, and so money, never depends on it.

// Channels (after the prefix).
const (
	chanKeys      = "keys"      // payload: a key id whose record changed
	chanCooldowns = "cooldowns" // payload: "<line> <until, unix ms>"
)

// maxCooldown bounds how long one 429's Retry-After keeps a line cooling on
// every replica: a broken or hostile Retry-After must not take a line out
// for a day.
const maxCooldown = 10 * time.Minute

// startSharing subscribes to the other replicas' messages.
func (g *Gateway) startSharing() {
	sh := g.sh
	sh.Subscribe(chanKeys, func(id string) {
		if len(id) > 0 && len(id) <= 128 {
			g.keys.evictID(id)
		}
	}, g.keys.clear) // messages may have been missed: forget every key
	sh.Subscribe(chanCooldowns, func(p string) {
		if name, until, ok := parseCooldown(p); ok {
			if l := g.lines.byName[name]; l != nil {
				l.coolTill(until)
			}
		}
	}, func() { g.loadCooldowns(context.Background()) })
}

// publishKey tells every replica that key id's record changed. Without
// Redis the other replicas see it when their cache entry expires.
func (g *Gateway) publishKey(ctx context.Context, id string) {
	if g.sh == nil || !g.sh.Up() {
		return
	}
	cctx, cancel := g.sh.Ctx(ctx)
	defer cancel()
	g.sh.Fail("publish", g.sh.Redis().Publish(cctx, g.sh.Prefix()+chanKeys, id).Err())
}

// --- cooldowns ---

// coolTill makes l cool until t (unix ns) unless it already cools longer.
func (l *line) coolTill(t int64) {
	for {
		cur := l.coolUntil.Load()
		if cur >= t || l.coolUntil.CompareAndSwap(cur, t) {
			return
		}
	}
}

// cooling says whether l is cooling at now and until when: a provider
// answered 429 with a Retry-After on some replica. One atomic load; no
// Redis on the hot path.
func (l *line) cooling(now time.Time) (time.Time, bool) {
	u := l.coolUntil.Load()
	if u == 0 || now.UnixNano() >= u {
		return time.Time{}, false
	}
	return time.Unix(0, u), true
}

// cool records a 429's wait d on line l for every replica: at once in this
// process, then in Redis (a key expiring with the cooldown, for replicas
// that subscribe later) and on the cooldowns channel. Without Redis it
// does nothing: a single replica leaves a 429'd line for the rest of the
// call only, as before.
func (g *Gateway) cool(l *line, d time.Duration) {
	if g.sh == nil || d <= 0 {
		return
	}
	d = min(d, maxCooldown)
	until := time.Now().Add(d)
	l.coolTill(until.UnixNano())
	g.met.cooldowns.WithLabelValues(l.cfg.Name).Inc()
	if !g.sh.Up() {
		return
	}
	go func() { // the call goes on to the next line meanwhile
		ctx, cancel := g.sh.Ctx(context.Background())
		defer cancel()
		ms := strconv.FormatInt(until.UnixMilli(), 10)
		p := g.sh.Prefix()
		_, err := g.sh.Redis().TxPipelined(ctx, func(tx redis.Pipeliner) error {
			tx.Set(ctx, p+"cool:"+l.cfg.Name, ms, d)
			tx.Publish(ctx, p+chanCooldowns, l.cfg.Name+" "+ms)
			return nil
		})
		g.sh.Fail("cooldown", err)
	}()
}

// loadCooldowns reads every line's cooldown from Redis: after a
// (re)subscription, the messages sent meanwhile are lost.
func (g *Gateway) loadCooldowns(ctx context.Context) {
	if len(g.lines.all) == 0 {
		return
	}
	keys := make([]string, len(g.lines.all))
	for i, l := range g.lines.all {
		keys[i] = g.sh.Prefix() + "cool:" + l.cfg.Name
	}
	cctx, cancel := g.sh.Ctx(ctx)
	defer cancel()
	vals, err := g.sh.Redis().MGet(cctx, keys...).Result()
	if err != nil {
		g.sh.Fail("cooldown", err)
		return
	}
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue
		}
		if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms > 0 && ms < math.MaxInt64/1_000_000 {
			g.lines.all[i].coolTill(ms * 1_000_000)
		}
	}
}

// parseCooldown reads a cooldowns message: "<line> <until, unix ms>".
func parseCooldown(p string) (name string, until int64, ok bool) {
	name, ms, found := strings.Cut(p, " ")
	if !found || name == "" || len(name) > 256 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n <= 0 || n >= math.MaxInt64/1_000_000 {
		return "", 0, false
	}
	return name, n * 1_000_000, true
}

// --- rate limits ---

// sharedLimit is rc as a GCRA limit: one request per 1/rate seconds, up to
// burst at once.
func sharedLimit(rc config.RateConfig) redis_rate.Limit {
	return redis_rate.Limit{Rate: 1, Period: time.Duration(float64(time.Second) / rc.Rate), Burst: rc.Burst}
}

// localShare is rc cut to this replica's share while Redis is down.
func localShare(rc config.RateConfig, replicas int) config.RateConfig {
	if replicas <= 1 {
		return rc
	}
	return config.RateConfig{Rate: rc.Rate / float64(replicas), Burst: max(rc.Burst/replicas, 1)}
}
