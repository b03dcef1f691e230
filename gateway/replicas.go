package gateway

import (
	"context"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/modelrelay/modelrelay/gateway/config"
)

// What replicas share through Redis (package shared), when redis.url is
// set: the rate limits (limits.go), key cache invalidations, upstream
// cooldowns after a 429 (package lines) and the calls answered but not yet settled (for
// read-after-answer on any replica). Each falls back to this process's own
// view while Redis is down; the ledger, and so money, never depends on it.

// Channels (after the prefix); the cooldowns' is the lines package's
// (lines.Set.Subscribe).
const (
	chanKeys = "keys" // payload: a key id whose record changed
)

// settleTTL is how long a call answered on one replica counts as settling
// for the others' admin reads if its replica never says it has settled (it
// died): past it, reads stop waiting for it.
const settleTTL = 30 * time.Second

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

// --- read after answer across replicas ---

// settleBeginScript records in Redis that a call of account answered (or
// is about to) before it settled: a member "<request id> <deadline, unix
// ms>" scored by its start (µs, Redis's clock, so replicas' clocks do not
// matter). An admin read of the account on any replica waits for it
// (waitSettled). It returns the member, which settleEnd removes. Numbers
// go to Redis as %d text: a Lua number would be sent with 14 digits.
var settleBeginScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local member = ARGV[1] .. ' ' .. string.format('%d', math.floor(now / 1000) + tonumber(ARGV[2]))
redis.call('ZADD', KEYS[1], string.format('%d', now), member)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return member
`)

// settlePendingScript counts the calls of KEYS[1] that began at or before
// ARGV[1] (µs, Redis's clock; 0: now) and have not passed their deadline,
// dropping those that have. It returns {cut, count}.
var settlePendingScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cut = tonumber(ARGV[1])
if cut == 0 then cut = now end
local n = 0
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', cut))) do
  local dl = tonumber(string.match(m, ' (%d+)$'))
  if dl == nil or dl * 1000 < now then
    redis.call('ZREM', KEYS[1], m)
  else
    n = n + 1
  end
end
return {cut, n}
`)

func (g *Gateway) settleKey(account string) string { return g.sh.Prefix() + "settling:" + account }

func (g *Gateway) settleBegin(ctx context.Context, account, rid string) string {
	if g.sh == nil || !g.sh.Up() {
		return ""
	}
	cctx, cancel := g.sh.Ctx(ctx)
	defer cancel()
	m, err := settleBeginScript.Run(cctx, g.sh.Redis(), []string{g.settleKey(account)}, rid, settleTTL.Milliseconds()).Text()
	if err != nil {
		g.sh.Fail("settling", err)
		return ""
	}
	return m
}

func (g *Gateway) settleEnd(account, member string) {
	if member == "" || g.sh == nil {
		return
	}
	ctx, cancel := g.sh.Ctx(context.Background())
	defer cancel()
	g.sh.Fail("settling", g.sh.Redis().ZRem(ctx, g.settleKey(account), member).Err())
}

// settlePoll is how often an admin read asks Redis whether the calls it
// waits for, answered on other replicas, have settled.
const settlePoll = 5 * time.Millisecond

// waitSettled waits until the calls of account answered before it was
// called, on this replica and (with Redis) on every other, have settled,
// or until ctx ends or settleWaitMax has passed.
func (g *Gateway) waitSettled(ctx context.Context, account string) {
	start := time.Now()
	g.settling.wait(ctx, account)
	if g.sh == nil || !g.sh.Up() {
		return
	}
	ctx, cancel := context.WithDeadline(ctx, start.Add(settleWaitMax))
	defer cancel()
	key := []string{g.settleKey(account)}
	var cut int64
	for {
		cctx, ccancel := g.sh.Ctx(ctx)
		v, err := settlePendingScript.Run(cctx, g.sh.Redis(), key, cut).Int64Slice()
		ccancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil || len(v) != 2 {
			g.sh.Fail("settling", err)
			return
		}
		if v[1] == 0 {
			return
		}
		cut = v[0]
		t := time.NewTimer(settlePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
