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
	return func(c *Config) {
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
func dropPrefix(t *testing.T, prefix string) {
	opt, err := redis.ParseURL(os.Getenv(testRedisVar))
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
	url := redisURL(t)
	const rate, burst, span = 10, 5, 2 * time.Second
	a := newEnv(t, withRedis(t, url), func(c *Config) { c.Limits.KeyRate = RateConfig{Rate: rate, Burst: burst} })
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
					time.Sleep(10 * time.Millisecond)
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
		for {
			code, _, _ := r.do("POST", "/v1/chat/completions", key, body)
			if code == 401 {
				break
			}
			if code != 200 {
				t.Fatalf("status %d", code)
			}
			if time.Since(revoked) > time.Second {
				t.Fatal("a key revoked on another replica still works after 1 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("refused by both other replicas %s after the revocation", time.Since(revoked).Round(time.Millisecond))
}

// TestReplicasShareCooldown: a line whose provider answers 429 with
// Retry-After: 5 on replica A is skipped by B and C until then; a pool
// whose only line cools answers 429 with the time left.
func TestReplicasShareCooldown(t *testing.T) {
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
	a := newEnv(t, withRedis(t, redisURL(t)), func(c *Config) {
		c.Retry.Max429Wait = -1
		c.Lines = []LineConfig{
			{Name: "eco-429", Protocol: ProtocolOpenAI, Models: []string{"*"}, Route: "economy", BaseURL: limited.URL, Priority: 0},
			{Name: "eco-a", Protocol: ProtocolOpenAI, Models: []string{"*"}, Route: "economy", Priority: 1},
			{Name: "std-429", Protocol: ProtocolOpenAI, Models: []string{"*"}, Route: "standard", BaseURL: limited.URL},
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
		for r.gw.lines.byName["eco-429"].coolUntil.Load() == 0 {
			if time.Since(cooled) > time.Second {
				t.Fatal("the cooldown did not reach another replica within 1 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
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
	d := a.replica(nil)
	for d.gw.lines.byName["eco-429"].coolUntil.Load() == 0 {
		if time.Since(cooled) > 2*time.Second {
			t.Fatal("a replica started later did not load the cooldown")
		}
		time.Sleep(5 * time.Millisecond)
	}

	std := a.key("acme", "standard")
	if code, _, _ := a.do("POST", "/v1/chat/completions", std, body); code != 429 {
		t.Fatalf("status %d, want the provider's 429", code)
	}
	before := hits.Load()
	code, h, data := b.do("POST", "/v1/chat/completions", std, body)
	for code == 200 || hits.Load() != before { // the cooldown may not have reached B yet
		if time.Since(cooled) > 3*time.Second {
			t.Fatalf("status %d: %s", code, data)
		}
		time.Sleep(10 * time.Millisecond)
		before = hits.Load()
		code, h, data = b.do("POST", "/v1/chat/completions", std, body)
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
	time.Sleep(s.d)
	return s.Store.Settle(ctx, st)
}

// TestReplicasReadAfterAnswer: an admin balance read on B right after a call
// answered on A shows the call's charge, though A settles it 300 ms after
// the answer.
func TestReplicasReadAfterAnswer(t *testing.T) {
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
