package billing

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/modelrelay/modelrelay/internal/shared"
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
// (WaitSettled). It returns the member, which end removes. Numbers
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

// sharedSettles is the calls answered and settling as the replicas share
// them in Redis; a nil client (a single replica) records and waits for
// nothing.
type sharedSettles struct{ sh *shared.Client }

// key is the Redis key of account's calls answered and settling.
func (s sharedSettles) key(account string) string { return s.sh.Prefix() + "settling:" + account }

// begin records in Redis that call rid of account answered before it
// settled (settleBeginScript) and returns the member end removes; ""
// without Redis or when it cannot be recorded.
func (s sharedSettles) begin(ctx context.Context, account, rid string) string {
	if s.sh == nil || !s.sh.Up() {
		return ""
	}
	cctx, cancel := s.sh.Ctx(ctx)
	defer cancel()
	m, err := settleBeginScript.Run(cctx, s.sh.Redis(), []string{s.key(account)}, rid, settleTTL.Milliseconds()).Text()
	if err != nil {
		s.sh.Fail("settling", err)
		return ""
	}
	return m
}

// end removes member, begin's, once its call has settled.
func (s sharedSettles) end(account, member string) {
	if member == "" || s.sh == nil {
		return
	}
	ctx, cancel := s.sh.Ctx(context.Background())
	defer cancel()
	s.sh.Fail("settling", s.sh.Redis().ZRem(ctx, s.key(account), member).Err())
}

// settlePoll is how often an admin read asks Redis whether the calls it
// waits for, answered on other replicas, have settled.
const settlePoll = 5 * time.Millisecond

// wait waits, with Redis, until the calls of account answered on
// any replica before start have settled, or until ctx ends or
// settleWaitMax has passed since start (WaitSettled).
func (s sharedSettles) wait(ctx context.Context, account string, start time.Time) {
	if s.sh == nil || !s.sh.Up() {
		return
	}
	ctx, cancel := context.WithDeadline(ctx, start.Add(settleWaitMax))
	defer cancel()
	key := []string{s.key(account)}
	var cut int64
	for {
		cctx, ccancel := s.sh.Ctx(ctx)
		v, err := settlePendingScript.Run(cctx, s.sh.Redis(), key, cut).Int64Slice()
		ccancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil || len(v) != 2 {
			s.sh.Fail("settling", err)
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
