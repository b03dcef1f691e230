package billing

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Read after answer across replicas: what the calls answered but not yet
// settled share through Redis (package shared), when redis.url is set, so
// that an admin read on any replica waits for them. It falls back to this
// process's own view while Redis is down; the ledger, and so money, never
// depends on it.

// settleTTL is how long a call answered on one replica counts as settling
// for the others' admin reads if its replica never says it has settled (it
// died): past it, reads stop waiting for it.
const settleTTL = 30 * time.Second

// settleBeginScript records in Redis that a call of account answered (or
// is about to) before it settled: a member "<request id> <deadline, unix
// ms>" scored by its start (µs, Redis's clock, so replicas' clocks do not
// matter). An admin read of the account on any replica waits for it
// (WaitSettled). It returns the member, which settleEnd removes. Numbers
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

// settleKey is the Redis key of account's calls answered and settling.
func (l *Ledger) settleKey(account string) string { return l.sh.Prefix() + "settling:" + account }

// settleBegin records in Redis that call rid of account answered before it
// settled (settleBeginScript) and returns the member settleEnd removes; ""
// without Redis or when it cannot be recorded.
func (l *Ledger) settleBegin(ctx context.Context, account, rid string) string {
	if l.sh == nil || !l.sh.Up() {
		return ""
	}
	cctx, cancel := l.sh.Ctx(ctx)
	defer cancel()
	m, err := settleBeginScript.Run(cctx, l.sh.Redis(), []string{l.settleKey(account)}, rid, settleTTL.Milliseconds()).Text()
	if err != nil {
		l.sh.Fail("settling", err)
		return ""
	}
	return m
}

// settleEnd removes member, settleBegin's, once its call has settled.
func (l *Ledger) settleEnd(account, member string) {
	if member == "" || l.sh == nil {
		return
	}
	ctx, cancel := l.sh.Ctx(context.Background())
	defer cancel()
	l.sh.Fail("settling", l.sh.Redis().ZRem(ctx, l.settleKey(account), member).Err())
}

// settlePoll is how often an admin read asks Redis whether the calls it
// waits for, answered on other replicas, have settled.
const settlePoll = 5 * time.Millisecond

// waitShared waits, with Redis, until the calls of account answered on
// any replica before start have settled, or until ctx ends or
// settleWaitMax has passed since start (WaitSettled).
func (l *Ledger) waitShared(ctx context.Context, account string, start time.Time) {
	if l.sh == nil || !l.sh.Up() {
		return
	}
	ctx, cancel := context.WithDeadline(ctx, start.Add(settleWaitMax))
	defer cancel()
	key := []string{l.settleKey(account)}
	var cut int64
	for {
		cctx, ccancel := l.sh.Ctx(ctx)
		v, err := settlePendingScript.Run(cctx, l.sh.Redis(), key, cut).Int64Slice()
		ccancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil || len(v) != 2 {
			l.sh.Fail("settling", err)
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
