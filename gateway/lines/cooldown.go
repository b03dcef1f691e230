package lines

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A provider's 429 with a wait makes its line cool on every replica
// sharing the Redis (Options.Shared): a key expiring with the cooldown,
// for replicas that subscribe later, and a message on the cooldowns
// channel for those listening. Each replica keeps its own view while
// Redis is down.

// chanCooldowns is the channel of cooldowns (after the shared prefix);
// payload: "<line> <until, unix ms>".
const chanCooldowns = "cooldowns"

// maxCooldown bounds how long one 429's Retry-After keeps a line cooling on
// every replica: a broken or hostile Retry-After must not take a line out
// for a day.
const maxCooldown = 10 * time.Minute

// Subscribe listens to the other replicas' cooldowns; after a
// (re)subscription it reads them all from Redis (loadCooldowns). It does
// nothing without Options.Shared.
func (s *Set) Subscribe() {
	if s.sh == nil {
		return
	}
	s.sh.Subscribe(chanCooldowns, func(p string) {
		if name, until, ok := parseCooldown(p); ok {
			if l := s.byName[name]; l != nil {
				l.coolTill(until)
			}
		}
	}, func() { s.loadCooldowns(context.Background()) })
}

// coolTill makes l cool until t (unix ns) unless it already cools longer.
func (l *Line) coolTill(t int64) {
	for {
		cur := l.coolUntil.Load()
		if cur >= t || l.coolUntil.CompareAndSwap(cur, t) {
			return
		}
	}
}

// Cooling says whether l is cooling at now and until when: a provider
// answered 429 with a Retry-After on some replica. One atomic load; no
// Redis on the hot path.
func (l *Line) Cooling(now time.Time) (time.Time, bool) {
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
func (s *Set) cool(l *Line, d time.Duration) {
	if s.sh == nil || d <= 0 {
		return
	}
	d = min(d, maxCooldown)
	until := time.Now().Add(d)
	l.coolTill(until.UnixNano())
	s.met.cooldowns.WithLabelValues(l.cfg.Name).Inc()
	if !s.sh.Up() {
		return
	}
	go func() { // the call goes on to the next line meanwhile
		ctx, cancel := s.sh.Ctx(context.Background())
		defer cancel()
		ms := strconv.FormatInt(until.UnixMilli(), 10)
		p := s.sh.Prefix()
		_, err := s.sh.Redis().TxPipelined(ctx, func(tx redis.Pipeliner) error {
			tx.Set(ctx, p+"cool:"+l.cfg.Name, ms, d)
			tx.Publish(ctx, p+chanCooldowns, l.cfg.Name+" "+ms)
			return nil
		})
		s.sh.Fail("cooldown", err)
	}()
}

// loadCooldowns reads every line's cooldown from Redis: after a
// (re)subscription, the messages sent meanwhile are lost.
func (s *Set) loadCooldowns(ctx context.Context) {
	if len(s.all) == 0 {
		return
	}
	keys := make([]string, len(s.all))
	for i, l := range s.all {
		keys[i] = s.sh.Prefix() + "cool:" + l.cfg.Name
	}
	cctx, cancel := s.sh.Ctx(ctx)
	defer cancel()
	vals, err := s.sh.Redis().MGet(cctx, keys...).Result()
	if err != nil {
		s.sh.Fail("cooldown", err)
		return
	}
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue
		}
		if ms, err := strconv.ParseInt(str, 10, 64); err == nil && ms > 0 && ms < math.MaxInt64/1_000_000 {
			s.all[i].coolTill(ms * 1_000_000)
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
