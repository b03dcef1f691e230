package gateway

import (
	"context"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/modelrelay/modelrelay/gateway/config"
)

// What replicas share through Redis (package shared), when redis.url is
// set: the rate limits (limits.go), key cache invalidations, upstream
// cooldowns after a 429 (package lines) and (package billing) the calls answered but not
// yet settled, for read-after-answer on any replica. Each falls back to this process's own
// view while Redis is down; the ledger, and so money, never depends on it.

// Channels (after the prefix); the cooldowns' is the lines package's
// (lines.Set.Subscribe).
const (
	chanKeys = "keys" // payload: a key id whose record changed
)

// startSharing subscribes to the other replicas' messages.
func (g *Gateway) startSharing() {
	sh := g.sh
	sh.Subscribe(chanKeys, func(id string) {
		if len(id) > 0 && len(id) <= 128 {
			g.keys.evictID(id)
		}
	}, g.keys.clear) // messages may have been missed: forget every key
	g.lines.Subscribe()
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
