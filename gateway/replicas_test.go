package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/internal/cutproxy"
	"github.com/modelrelay/modelrelay/internal/testwait"
	"github.com/modelrelay/modelrelay/store"
)

// testRedisVar names the Redis the replica tests share, e.g.
// redis://127.0.0.1:6379/0 (.ci/run sets it).
const testRedisVar = "RELAY_TEST_REDIS"

// withRedis gives the env's replicas a Redis at url under a key prefix of
// their own (so tests run in parallel on one server), and removes the
// prefix's keys at the end.
func withRedis(t *testing.T, url string) envOption {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix := "relaytest:" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + ":" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() { dropPrefix(t, prefix) })
	return func(c *config.Config) {
		c.Redis.URL = url
		c.Redis.Prefix = prefix
	}
}

func redisURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv(testRedisVar)
	if u == "" {
		t.Skipf("%s is not set: the replica tests need a Redis (e.g. %s=redis://127.0.0.1:6379/0)", testRedisVar, testRedisVar)
	}
	return u
}

// dropPrefix deletes the keys a test made (never FLUSHALL: others share
// the server).
func dropPrefix(t *testing.T, prefix string) { dropPrefixURL(os.Getenv(testRedisVar), prefix) }

func dropPrefixURL(url, prefix string) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	for _, pat := range []string{prefix + "*", "rate:" + prefix + "*"} {
		iter := rdb.Scan(ctx, 0, pat, 100).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	}
}

// TestReplicasShareKeyRate: three replicas, one key limited to R/s with
// burst B, requests spread over all three for T: at most R·T + B succeed
// (one replica alone would allow that much; three without Redis, three
// times as much).
func TestReplicasShareKeyRate(t *testing.T) {
	t.Parallel()
	url := redisURL(t)
	const rate, burst, span = 5, 5, 10 * time.Second // the issue's: over 10 s at most R·10 plus one burst
	// A generous redis.timeout: this test measures the shared limit, and a
	// command slower than the default 100 ms on a loaded machine would send
	// a replica to its local fallback bucket (a documented, looser limit).
	a := newEnv(t, withRedis(t, url), func(c *config.Config) {
		c.Limits.KeyRate = config.RateConfig{Rate: rate, Burst: burst}
		c.Redis.Timeout = 2 * time.Second
	})
	reps := []*env{a, a.replica(nil), a.replica(nil)}
	a.account("acme", "100")
	key := a.key("acme", "economy")
	body := chatBody("modelf-flash", "hi", `"max_tokens":4`)

	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, r := range reps {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Since(start) < span {
					code, h, _ := r.do("POST", "/v1/chat/completions", key, body)
					switch code {
					case 200:
						ok.Add(1)
					case 429:
						limited.Add(1)
						if n, err := strconv.Atoi(h.Get("Retry-After")); err != nil || n < 1 {
							t.Errorf("429 with Retry-After %q", h.Get("Retry-After"))
							return
						}
					default:
						t.Errorf("status %d", code)
						return
					}
					// The load's pace, not a wait: ~50 calls a second
					// per client spread over the whole span.
					time.Sleep(20 * time.Millisecond)
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	most := int64(rate*elapsed.Seconds()) + burst + 1
	t.Logf("%d answered, %d refused with 429 over %s across 3 replicas (at most %d allowed)", ok.Load(), limited.Load(), elapsed, most)
	if ok.Load() > most {
		t.Fatalf("%d calls answered over %s; the global limit allows at most %d", ok.Load(), elapsed, most)
	}
	if ok.Load() < rate*int64(span/time.Second) {
		t.Fatalf("only %d calls answered; the limit allows about %d", ok.Load(), most)
	}
	if limited.Load() == 0 {
		t.Fatal("no call was refused: the limit was not applied")
	}
}

// TestReplicasRevocation: a key revoked through A is refused by B and C
// within a second, though both had it cached (their cache keeps it 10 s).
func TestReplicasRevocation(t *testing.T) {
	// Not parallel: it bounds the revocation's spread at 1 s.
	a := newEnv(t, withRedis(t, redisURL(t)))
	b, c := a.replica(nil), a.replica(nil)
	a.account("acme", "100")
	key := a.key("acme", "economy")
	body := chatBody("modelf-flash", "hi", `"max_tokens":4`)
	for _, r := range []*env{a, b, c} { // each caches the key
		if code, _, data := r.do("POST", "/v1/chat/completions", key, body); code != 200 {
			t.Fatalf("status %d: %s", code, data)
		}
	}
	if code, _, data := a.do("POST", "/admin/keys/revoke", testAdminToken, map[string]string{"key": key}); code != 200 {
		t.Fatalf("revoke: %d %s", code, data)
	}
	revoked := time.Now()
	for _, r := range []*env{b, c} {
		refused := testwait.Holds(time.Second-time.Since(revoked), func() bool {
			code, _, _ := r.do("POST", "/v1/chat/completions", key, body)
			if code != 200 && code != 401 {
				t.Fatalf("status %d", code)
			}
			return code == 401
		})
		if !refused {
			t.Fatal("a key revoked on another replica still works after 1 s")
		}
	}
	t.Logf("refused by both other replicas %s after the revocation", time.Since(revoked).Round(time.Millisecond))
}

// TestReplicasShareCooldown: a line whose provider answers 429 with
// Retry-After: 5 on replica A is skipped by B and C until then; a pool
// whose only line cools answers 429 with the time left.
func TestReplicasShareCooldown(t *testing.T) {
	// Not parallel: it reads the time left of a 5 s cooldown.
	var hits atomic.Int64
	limited := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Retry-After", "5")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}`)
	}))
	t.Cleanup(limited.Close)
	a := newEnv(t, withRedis(t, redisURL(t)), func(c *config.Config) {
		c.Retry.Max429Wait = -1
		c.Lines = []config.LineConfig{
			{Name: "eco-429", Protocol: config.ProtocolOpenAI, Models: []string{"*"}, Route: "economy", BaseURL: limited.URL, Priority: 0},
			{Name: "eco-a", Protocol: config.ProtocolOpenAI, Models: []string{"*"}, Route: "economy", Priority: 1},
			{Name: "std-429", Protocol: config.ProtocolOpenAI, Models: []string{"*"}, Route: "standard", BaseURL: limited.URL},
		}
	})
	b, c := a.replica(nil), a.replica(nil)
	a.account("acme", "100")
	eco := a.key("acme", "economy")
	body := chatBody("modelf-flash", "hi", `"max_tokens":4`)
	if code, _, data := a.do("POST", "/v1/chat/completions", eco, body); code != 200 {
		t.Fatalf("status %d: %s", code, data)
	}
	if hits.Load() != 1 {
		t.Fatalf("the 429 line had %d tries, want 1", hits.Load())
	}
	cooled := time.Now()
	for _, r := range []*env{b, c} {
		waitCooling(t, r, cooled, time.Second, "the cooldown did not reach another replica within 1 s")
	}
	for _, r := range []*env{a, b, c} {
		for range 5 {
			if code, _, data := r.do("POST", "/v1/chat/completions", eco, body); code != 200 {
				t.Fatalf("status %d: %s", code, data)
			}
		}
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the cooling line was tried %d times by the replicas, want only the first", n)
	}
	// A replica that starts later reads the cooldown from Redis.
	waitCooling(t, a.replica(nil), cooled, 2*time.Second, "a replica started later did not load the cooldown")
	checkCoolingRefusedWithoutTry(t, a, b, &hits, body, cooled)
}

// waitCooling waits for line eco-429 of r to be cooling, until within
// after cooled; then it fails the test with msg.
func waitCooling(t *testing.T, r *env, cooled time.Time, within time.Duration, msg string) {
	t.Helper()
	if !testwait.Holds(within-time.Since(cooled), func() bool {
		_, cooling := r.gw.lines.ByName("eco-429").Cooling(time.Now())
		return cooling
	}) {
		t.Fatal(msg)
	}
}

// checkCoolingRefusedWithoutTry: on the standard route, whose only line
// answers 429, a call on A gets the provider's 429; then B refuses at once,
// without a try upstream (hits), with upstream_rate_limited and the time
// left of the 5 s.
func checkCoolingRefusedWithoutTry(t *testing.T, a, b *env, hits *atomic.Int64, body string, cooled time.Time) {
	t.Helper()
	std := a.key("acme", "standard")
	if code, _, _ := a.do("POST", "/v1/chat/completions", std, body); code != 429 {
		t.Fatalf("status %d, want the provider's 429", code)
	}
	var before int64
	var code int
	var h http.Header
	var data []byte
	// The cooldown may not have reached B yet.
	if !testwait.Holds(3*time.Second-time.Since(cooled), func() bool {
		before = hits.Load()
		code, h, data = b.do("POST", "/v1/chat/completions", std, body)
		return code != 200 && hits.Load() == before
	}) {
		t.Fatalf("status %d: %s", code, data)
	}
	if code != 429 || hits.Load() != before {
		t.Fatalf("status %d (%d tries upstream), want 429 without a try", code, hits.Load()-before)
	}
	if _, _, ecode := errBody(t, data); ecode != "upstream_rate_limited" {
		t.Fatalf("code %v", ecode)
	}
	if n, _ := strconv.Atoi(h.Get("Retry-After")); n < 1 || n > 5 {
		t.Fatalf("Retry-After %q, want the time left of the 5 s", h.Get("Retry-After"))
	}
}

// slowSettle delays every settle, so that an answer is out long before its
// charge is in the ledger.
type slowSettle struct {
	Store
	d time.Duration
}

func (s slowSettle) Settle(ctx context.Context, st store.Settlement) (store.Entry, error) {
	time.Sleep(s.d) // the slow settle under test
	return s.Store.Settle(ctx, st)
}

// TestReplicasReadAfterAnswer: an admin balance read on B right after a call
// answered on A shows the call's charge, though A settles it 300 ms after
// the answer.
func TestReplicasReadAfterAnswer(t *testing.T) {
	t.Parallel()
	a0 := newEnv(t, withRedis(t, redisURL(t)))
	a := a0.replica(func(s Store) Store { return slowSettle{s, 300 * time.Millisecond} })
	b := a0.replica(nil)
	a.account("acme", "100")
	key := a.key("acme", "economy")
	for i := range 3 {
		if code, _, data := a.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hi", `"max_tokens":4`)); code != 200 {
			t.Fatalf("status %d: %s", code, data)
		}
		code, _, data := b.do("GET", "/admin/accounts/acme/charges", testAdminToken, nil)
		if code != 200 {
			t.Fatalf("charges: %d %s", code, data)
		}
		if n := strings.Count(string(data), `"kind":"charge"`); n != i+1 {
			t.Fatalf("after %d answered calls replica B shows %d charges: %s", i+1, n, data)
		}
	}
}

// redisVia is redisURL with its address replaced by the proxy's.
func redisVia(t *testing.T, redisURL string, p *cutproxy.Proxy, target string) string {
	t.Helper()
	return strings.Replace(redisURL, target, p.Addr(), 1)
}

// TestReplicasRedisDown: Redis stopped mid-load. Fail-open: calls keep being
// answered under per-replica limits (half the global rate each, with
// redis.replicas 2), a log line and relay_redis_up say so, nothing is
// charged twice; when Redis is back the replicas share again by themselves
// (a revocation reaches the other replica at once). Fail-closed: 503.
func TestReplicasRedisDown(t *testing.T) {
	// Not parallel: its local bucket refills at 1 call a second while it counts.
	base := redisURL(t)
	for _, closed := range []bool{false, true} {
		t.Run("fail_closed="+strconv.FormatBool(closed), func(t *testing.T) {
			opt, err := redis.ParseURL(base)
			if err != nil {
				t.Fatal(err)
			}
			p := cutproxy.Start(t, opt.Addr)
			a := newEnv(t, withRedis(t, redisVia(t, base, p, opt.Addr)), func(c *config.Config) {
				c.Limits.KeyRate = config.RateConfig{Rate: 1, Burst: 4}
				c.Redis.Replicas = 2
				c.Redis.FailClosed = closed
			})
			b := a.replica(nil)
			a.account("acme", "100")
			cl := &countingCaller{key: a.key("acme", "economy"), body: chatBody("modelf-flash", "hi", `"max_tokens":4`)}
			testwait.For(t, 2*time.Second, "redis up", func() bool { return a.sh.Up() && b.sh.Up() })
			if code, _, data := cl.call(a); code != 200 {
				t.Fatalf("status %d: %s", code, data)
			}

			p.Cut()
			// The first call after the cut finds out (within redis.timeout),
			// or the background ping does first.
			code, _, data := cl.call(b)
			testwait.For(t, 2*time.Second, "redis seen down", func() bool { return !a.sh.Up() && !b.sh.Up() })
			if closed {
				checkFailClosed(t, cl, a, b)
			} else {
				if code != 200 {
					t.Fatalf("fail-open: status %d: %s", code, data)
				}
				checkFailOpen(t, cl, a, b)
			}
			checkRedisDownReported(t, a, b)

			p.Restore(t)
			checkRedisRecovered(t, cl, a, b)
		})
	}
}

// countingCaller makes the chat calls of TestReplicasRedisDown with key
// and counts those answered.
type countingCaller struct {
	key, body string
	answered  int
}

func (cl *countingCaller) call(r *env) (int, http.Header, []byte) {
	code, h, data := r.do("POST", "/v1/chat/completions", cl.key, cl.body)
	if code == 200 {
		cl.answered++
	}
	return code, h, data
}

// checkFailClosed wants each replica to refuse a call with 503
// shared_limits_unavailable and Retry-After while Redis is down.
func checkFailClosed(t *testing.T, cl *countingCaller, a, b *env) {
	t.Helper()
	for _, r := range []*env{a, b} {
		code, h, data := cl.call(r)
		if code != 503 {
			t.Fatalf("fail-closed: status %d: %s", code, data)
		}
		if _, typ, ecode := errBody(t, data); typ != "service_unavailable_error" || ecode != "shared_limits_unavailable" {
			t.Fatalf("fail-closed: %s %v", typ, ecode)
		}
		if h.Get("Retry-After") == "" {
			t.Fatal("fail-closed 503 without Retry-After")
		}
	}
}

// checkFailOpen wants each replica to answer from its local bucket while
// Redis is down: burst 4/2 = 2, then 429.
func checkFailOpen(t *testing.T, cl *countingCaller, a, b *env) {
	t.Helper()
	for _, r := range []*env{a, b} {
		codes := []int{}
		for range 4 {
			c, _, _ := cl.call(r)
			codes = append(codes, c)
		}
		if codes[3] != 429 {
			t.Fatalf("fail-open: statuses %v; the local limit (half the burst) should refuse by the 4th", codes)
		}
		if codes[0] != 200 && r == a {
			t.Fatalf("fail-open: statuses %v", codes)
		}
	}
}

// checkRedisDownReported wants each replica to log that Redis is
// unavailable and its metrics to say so.
func checkRedisDownReported(t *testing.T, a, b *env) {
	t.Helper()
	for _, r := range []*env{a, b} {
		if !strings.Contains(r.logs.String(), "redis is unavailable") {
			t.Fatal("no log line says redis is unavailable")
		}
		_, _, m := r.do("GET", "/metrics", "", nil)
		if !strings.Contains(string(m), "relay_redis_up 0") || !strings.Contains(string(m), "relay_redis_errors_total") {
			t.Fatalf("metrics do not say redis is down:\n%s", grepLines(string(m), "relay_redis"))
		}
	}
}

// checkRedisRecovered wants both replicas to see Redis back and log it,
// sharing to resume (a revocation on A reaches B, which has the key
// cached, at once), and one charge per answered call.
func checkRedisRecovered(t *testing.T, cl *countingCaller, a, b *env) {
	t.Helper()
	testwait.For(t, 3*time.Second, "redis back up", func() bool { return a.sh.Up() && b.sh.Up() })
	for _, r := range []*env{a, b} {
		if !strings.Contains(r.logs.String(), "redis is answering") {
			t.Fatal("no log line says redis is back")
		}
	}
	// The key's token buckets refill in real time: this wait is the
	// refill the next call needs, not a guess at something else.
	time.Sleep(2 * time.Second)
	if code, _, data := cl.call(b); code != 200 {
		t.Fatalf("after recovery: status %d: %s", code, data)
	}
	if code, _, data := a.do("POST", "/admin/keys/revoke", testAdminToken, map[string]string{"key": cl.key}); code != 200 {
		t.Fatalf("revoke: %d %s", code, data)
	}
	testwait.For(t, time.Second, "the revocation reaches B after the recovery", func() bool {
		c, _, _ := cl.call(b) // a 200 before the revocation lands is charged, and counted
		return c == 401
	})
	// Nothing charged twice, nothing lost: one charge per answered call. A
	// JSON answer settles after it is sent (on PostgreSQL in the
	// background, and B's settles are B's), so the last may land a moment
	// after the read.
	testwait.For(t, 5*time.Second, "one charge per answered call", func() bool {
		es, err := a.charges("acme", 1000)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range es {
			if e.Kind == store.KindCharge {
				n++
			}
		}
		if n > cl.answered {
			t.Fatalf("%d charges for %d answered calls", n, cl.answered)
		}
		return n == cl.answered
	})
}
