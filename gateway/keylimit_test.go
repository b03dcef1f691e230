package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/store"
)

// testClock runs with real time from a moment a test sets (the retry
// budget and deadlines still see time pass).
type testClock struct{ off atomic.Int64 }

func (c *testClock) Now() time.Time       { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *testClock) Set(t time.Time)      { c.off.Store(int64(time.Until(t))) }
func newTestClock(t time.Time) *testClock { c := &testClock{}; c.Set(t); return c }

// restart serves a new Gateway on e's store (wrapped by wrap, when not
// nil), plugins and providers, with clock now (nil: time.Now), in place of
// e's: as relay serve restarted with another clock.
func (e *env) restart(now func() time.Time, wrap func(Store) Store) {
	e.t.Helper()
	var st Store = e.store
	if wrap != nil {
		st = wrap(st)
	}
	log := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: envLogLevel}))
	gw, err := New(Options{Config: e.cfg, Store: st, Plugins: e.host, Logger: log, Shared: e.sh, Now: now})
	if err != nil {
		e.t.Fatal(err)
	}
	old := e.srv
	e.serve(gw)
	old.Close()
}

// keyWith creates a key with k's settings on account and route and
// returns the plaintext and the key's id.
func (e *env) keyWith(account, route string, k store.Key) (plain, id string) {
	e.t.Helper()
	plain, id, hash, err := store.NewKey()
	if err != nil {
		e.t.Fatal(err)
	}
	k.ID, k.Hash, k.Account, k.Route, k.Created = id, hash, account, route, time.Now()
	if err := e.store.CreateKey(context.Background(), k); err != nil {
		e.t.Fatal(err)
	}
	return plain, id
}

// storedKey reads the key id back from the store.
func (e *env) storedKey(id string) store.Key {
	e.t.Helper()
	ks, err := e.store.ListKeys(context.Background(), "")
	if err != nil {
		e.t.Fatal(err)
	}
	for _, k := range ks {
		if k.ID == id {
			return k
		}
	}
	e.t.Fatalf("key %s not found", id)
	return store.Key{}
}

// countHolds counts the holds the gateway asks the store for.
type countHolds struct {
	Store
	n *atomic.Int64
}

func (c countHolds) Hold(ctx context.Context, h store.Hold) error {
	c.n.Add(1)
	return c.Store.Hold(ctx, h)
}

// keyCharges sums the charges the journal holds for key id, and the
// largest overrun (charge − hold) among them.
func keyCharges(t *testing.T, e *env, account, id string) (spent, overrun pricing.Nano, n int) {
	t.Helper()
	es, err := e.charges(account, 100000)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range es {
		if en.Kind == store.KindCharge && en.KeyID == id {
			spent -= en.Amount
			overrun = max(overrun, -en.Amount-en.HoldAmount)
			n++
		}
	}
	return spent, overrun, n
}

// TestKeyLimitUnderConcurrency: a key limited to $0.10 a month, 200 calls
// at once on an account with plenty. Images (a fixed $0.03 fee, held and
// charged exactly): three are admitted, the rest are 402
// key_limit_exceeded, the key spends $0.09 and the next call is refused;
// in the next month (a test clock) it spends again. Streams (a hold far
// above their charge): exactly the holds the limit covers are admitted.
// The key's spend never passes $0.10 plus one call's overrun.
func TestKeyLimitUnderConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	clock := newTestClock(time.Date(2027, 3, 10, 12, 0, 0, 0, time.UTC))
	e.restart(clock.Now, nil)
	for _, s := range e.sims { // every call in flight together
		s.SetOptions(sim.Options{Latency: 1500 * time.Millisecond, FirstChunk: 1500 * time.Millisecond, Chunks: 4})
	}
	const limit = 10 * pricing.NanoPerUSD / 100
	e.account("acme", "50")

	t.Run("images", func(t *testing.T) {
		key, id := e.keyWith("acme", "auto", store.Key{Limit: limit, Reset: store.ResetMonthly})
		image := `{"model":"modelb-image-2.5-flare","prompt":"a red kite","size":"1024x1024","n":1}`
		ok, denied, others := burst(e, key, "/v1/images/generations", image, 200)
		if ok != 3 || denied != 197 || len(others) != 0 {
			t.Fatalf("admitted %d, refused %d, other %q; want 3 admitted", ok, denied, others)
		}
		fee := 3 * pricing.NanoPerUSD / 100
		wantKeySpent(t, e, "acme", id, 3*fee, limit)
		st, _, data := e.do("POST", "/v1/images/generations", key, image)
		if msg, _, code := errBody(t, data); st != 402 || code != "key_limit_exceeded" || !strings.Contains(msg, "the key has 0.01 USD left of its 0.1 USD monthly limit") {
			t.Fatalf("with 0.01 USD left: %d %s", st, data)
		}
		clock.Set(time.Date(2027, 4, 1, 0, 0, 1, 0, time.UTC)) // April: the limit starts again
		if st, _, data := e.do("POST", "/v1/images/generations", key, image); st != 200 {
			t.Fatalf("the first call of a new month: %d %s", st, data)
		}
		v := adminKeyDo(t, e, "GET", "/admin/keys/"+id, nil)
		if v.SpentUSD != fee.Fixed() || v.RemainingUSD != (limit-fee).Fixed() || v.PeriodStart != "2027-04-01T00:00:00Z" || v.ResetsAt != "2027-05-01T00:00:00Z" {
			t.Errorf("the key in April after one image: %+v", v)
		}
		wantKeySpent(t, e, "acme", id, 4*fee, 2*limit)
	})

	t.Run("streams", func(t *testing.T) {
		body := chatBody("modelf-flash", "concurrency", `"max_tokens":8000`, `"stream":true`)
		q, err := e.host.Admit(context.Background(), abi.AdmitRequest{
			Endpoint: pricing.EndpointChat, Model: "modelf-flash", Route: "economy",
			InputTokens: holdInputTokens(len(body)), MaxOutputTokens: 8000, DefaultOutputTokens: 4096, Stream: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		admittable := int64(limit / pricing.Nano(q.Hold))
		if admittable < 2 || admittable > 50 {
			t.Fatalf("a hold of %s USD admits %d calls under the limit: pick another max_tokens", pricing.Nano(q.Hold), admittable)
		}
		key, id := e.keyWith("acme", "economy", store.Key{Limit: limit, Reset: store.ResetMonthly})
		ok, denied, others := burst(e, key, "/v1/chat/completions", body, 200)
		if ok != admittable || denied != 200-admittable || len(others) != 0 {
			t.Fatalf("admitted %d, refused %d, other %q; want %d admitted", ok, denied, others, admittable)
		}
		spent, _, _ := keyCharges(t, e, "acme", id)
		wantKeySpent(t, e, "acme", id, spent, limit)
	})
	if a := e.balance("acme"); a.Held != 0 {
		t.Errorf("account: held %s after every call ended", a.Held)
	}
	sum, _ := journalSum(t, e, "acme")
	if a := e.balance("acme"); a.Balance != sum {
		t.Errorf("balance %s, journal %s", a.Balance, sum)
	}
}

// wantKeySpent fails t unless the journal's charges of key id sum to
// spent, no more than bound plus the largest overrun among them, and the
// key's record holds nothing.
func wantKeySpent(t *testing.T, e *env, account, id string, spent, bound pricing.Nano) {
	t.Helper()
	got, overrun, n := keyCharges(t, e, account, id)
	if got != spent || got > bound+overrun {
		t.Errorf("the key spent %s USD in %d calls (largest overrun %s USD), want %s, at most %s", got, n, overrun, spent, bound)
	}
	if k := e.storedKey(id); k.Held != 0 {
		t.Errorf("the key still holds %s USD", k.Held)
	}
}

// burst sends n copies of a body to path at once with key and counts the
// answers: 200s, 402 key_limit_exceeded and the others.
func burst(e *env, key, path, body string, n int) (ok, denied int64, others []string) {
	var okN, deniedN atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest("POST", e.url+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				mu.Lock()
				others = append(others, err.Error())
				mu.Unlock()
				return
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			switch {
			case resp.StatusCode == 200:
				okN.Add(1)
			case resp.StatusCode == 402 && strings.Contains(string(data), "key_limit_exceeded"):
				deniedN.Add(1)
			default:
				mu.Lock()
				others = append(others, fmt.Sprintf("%d %s", resp.StatusCode, data))
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	return okN.Load(), deniedN.Load(), others
}

// TestKeyLimit402: the key's limit and the account's credit refuse with
// different codes, each in the error shape (docs/api.md#errors) with x-should-retry:
// false, and the key's says what remains and when it resets.
func TestKeyLimit402(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.restart(newTestClock(time.Date(2027, 3, 10, 12, 0, 0, 0, time.UTC)).Now, nil)
	e.account("acme", "50")
	e.account("poor", "0.000001")
	capped, _ := e.keyWith("acme", "auto", store.Key{Limit: pricing.NanoPerUSD / 1000, Reset: store.ResetWeekly})
	rich, _ := e.keyWith("poor", "auto", store.Key{Limit: 5 * pricing.NanoPerUSD, Reset: store.ResetDaily})
	body := chatBody("modela-opus-5-5", "hi", `"max_tokens":4000`)
	for _, tc := range []struct {
		name, key, code string
		says            []string
	}{
		{"key limit", capped, "key_limit_exceeded", []string{"key's spend limit", "0.001 USD weekly limit", "left", "resets at 2027-03-15T00:00:00Z"}},
		{"account credit", rich, "insufficient_credit", []string{"needs up to", "available 0.000001 USD"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, h, data := e.do("POST", "/v1/chat/completions", tc.key, body)
			if st != 402 {
				t.Fatalf("%d %s", st, data)
			}
			msg, typ, code := errBody(t, data)
			if code != tc.code || typ != "insufficient_quota" || h.Get("X-Should-Retry") != "false" {
				t.Errorf("code %v type %v x-should-retry %q", code, typ, h.Get("X-Should-Retry"))
			}
			for _, s := range tc.says {
				if !strings.Contains(msg, s) {
					t.Errorf("%q does not say %q", msg, s)
				}
			}
		})
	}
}

// TestExpiredAndAllowListBeforeHold: an expired key is 401 key_expired
// saying when, a call from outside the key's allow-list is 403
// address_not_allowed; neither asks for a hold, reaches a provider or
// writes a journal entry. A listed address is served.
func TestExpiredAndAllowListBeforeHold(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var holds atomic.Int64
	clock := newTestClock(time.Date(2027, 3, 10, 12, 0, 0, 0, time.UTC))
	e.restart(clock.Now, func(s Store) Store { return countHolds{s, &holds} })
	e.account("acme", "5")
	expires := time.Date(2027, 3, 10, 11, 59, 0, 0, time.UTC)
	expired, _ := e.keyWith("acme", "auto", store.Key{Expires: expires})
	elsewhere, _ := e.keyWith("acme", "auto", store.Key{Allow: []string{"10.0.0.0/8", "2001:db8::/32"}})
	local, _ := e.keyWith("acme", "auto", store.Key{Allow: []string{"10.0.0.0/8", "127.0.0.1/32"}, Expires: expires.AddDate(0, 1, 0)})
	body := chatBody("modelf-flash", "hi", `"max_tokens":8`)
	upstream := func() (n int64) {
		for _, s := range e.sims {
			n += s.Requests()
		}
		return n
	}
	for _, tc := range []struct {
		name, path, key string
		status          int
		typ, code, says string
	}{
		{"expired", "/v1/chat/completions", expired, 401, "authentication_error", "key_expired", "expired at 2027-03-10T11:59:00Z"},
		{"expired, models", "/v1/models", expired, 401, "authentication_error", "key_expired", "expired"},
		{"outside the allow-list", "/v1/chat/completions", elsewhere, 403, "permission_error", "address_not_allowed", "127.0.0.1"},
		{"outside the allow-list, models", "/v1/models", elsewhere, 403, "permission_error", "address_not_allowed", "allow-list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method, b := "POST", any(body)
			if tc.path == "/v1/models" {
				method, b = "GET", nil
			}
			st, h, data := e.do(method, tc.path, tc.key, b)
			if st != tc.status {
				t.Fatalf("%d %s", st, data)
			}
			msg, typ, code := errBody(t, data)
			if typ != tc.typ || code != tc.code || !strings.Contains(msg, tc.says) || !strings.HasSuffix(msg, h.Get("X-Request-Id")) {
				t.Errorf("type %v code %v message %q", typ, code, msg)
			}
		})
	}
	if n, up := holds.Load(), upstream(); n != 0 || up != 0 {
		t.Fatalf("refused calls took %d holds and sent %d requests upstream", n, up)
	}
	if es, err := e.charges("acme", 100); err != nil || len(es) != 1 || es[0].Kind != store.KindCredit {
		t.Fatalf("journal %+v %v: want the credit alone", es, err)
	}
	if st, _, data := e.do("POST", "/v1/chat/completions", local, body); st != 200 {
		t.Fatalf("a key whose allow-list holds the client: %d %s", st, data)
	}
	// The moment of expiry is expired.
	clock.Set(expires.AddDate(0, 1, 0))
	if st, _, data := e.do("POST", "/v1/chat/completions", local, body); st != 401 {
		t.Fatalf("at its expiry: %d %s", st, data)
	}
}

// TestNextReset: a period ends at the next 00:00 UTC, Monday or first of
// the month; a limit without a period never resets.
func TestNextReset(t *testing.T) {
	t.Parallel()
	now := time.Date(2027, 3, 10, 23, 59, 59, 0, time.FixedZone("x", 3600)) // a Wednesday, 22:59:59 UTC
	for reset, want := range map[string]string{
		store.ResetDaily: "2027-03-11T00:00:00Z", store.ResetWeekly: "2027-03-15T00:00:00Z", store.ResetMonthly: "2027-04-01T00:00:00Z",
	} {
		if got, ok := apierr.NextReset(reset, now); !ok || got.Format(time.RFC3339) != want {
			t.Errorf("%s: %v %v, want %s", reset, got, ok, want)
		}
	}
	if _, ok := apierr.NextReset(store.ResetNever, now); ok {
		t.Error("a limit without a period resets")
	}
}

// TestKeyUsable: the allow-list is checked against the connection's
// address (IPv4, IPv6, IPv4-mapped), never X-Forwarded-For.
func TestKeyUsable(t *testing.T) {
	t.Parallel()
	now := time.Date(2027, 3, 10, 12, 0, 0, 0, time.UTC)
	k := store.Key{Allow: []string{"10.0.0.0/8", "2001:db8::/32"}}
	for _, tc := range []struct {
		remote, xff string
		want        any // nil, or the code
	}{
		{"10.1.2.3:5000", "", nil},
		{"[2001:db8::1]:443", "", nil},
		{"[::ffff:10.9.9.9]:443", "", nil},
		{"127.0.0.1:5000", "10.1.2.3", "address_not_allowed"},
		{"not an address", "", "address_not_allowed"},
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		e := keyUsable(k, r, now)
		switch {
		case tc.want == nil && e != nil:
			t.Errorf("%s: %v", tc.remote, e)
		case tc.want != nil && (e == nil || e.Status != 403 || e.Code != tc.want):
			t.Errorf("%s (X-Forwarded-For %q): %+v, want 403 %v", tc.remote, tc.xff, e, tc.want)
		}
	}
	r, _ := http.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.2.3:5000"
	k.Expires = now
	if e := keyUsable(k, r, now); e == nil || e.Status != 401 || e.Code != "key_expired" || !strings.Contains(e.Message, "2027-03-10T12:00:00Z") {
		t.Errorf("at its expiry: %+v", e)
	}
}

// TestOpenAPIConformanceKeySettings: the refusals of a key's own settings
// (401 expired, 403 outside its allow-list, 402 over its limit) on each
// endpoint that can give them conform to the document.
func TestOpenAPIConformanceKeySettings(t *testing.T) {
	t.Parallel()
	c := loadConformance(t)
	e := newEnv(t)
	e.account("acme", "50")
	expired, _ := e.keyWith("acme", "standard", store.Key{Expires: time.Now().Add(-time.Minute)})
	elsewhere, _ := e.keyWith("acme", "standard", store.Key{Allow: []string{"192.0.2.0/24"}})
	capped, _ := e.keyWith("acme", "standard", store.Key{Limit: 1, Reset: store.ResetMonthly})
	chat := []byte(chatBody("modelf-flash", "hi", `"max_tokens":8`))
	bearer := func(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }
	for _, x := range []exchange{
		{name: "401 expired", method: "POST", path: "/v1/chat/completions", header: bearer(expired), body: chat, wantStatus: 401},
		{name: "401 expired, models", method: "GET", path: "/v1/models", header: bearer(expired), wantStatus: 401},
		{name: "401 expired, video", method: "GET", path: "/v1/videos/vid_123", header: bearer(expired), wantStatus: 401},
		{name: "403 allow-list", method: "POST", path: "/v1/chat/completions", header: bearer(elsewhere), body: chat, wantStatus: 403},
		{name: "403 allow-list, models", method: "GET", path: "/v1/models", header: bearer(elsewhere), wantStatus: 403},
		{name: "403 allow-list, video", method: "GET", path: "/v1/videos/vid_123", header: bearer(elsewhere), wantStatus: 403},
		{name: "403 allow-list, video content", method: "GET", path: "/v1/videos/vid_123/content", header: bearer(elsewhere), wantStatus: 403},
		{name: "402 key limit", method: "POST", path: "/v1/chat/completions", header: bearer(capped), body: chat, wantStatus: 402},
	} {
		t.Run(x.name, func(t *testing.T) {
			h, body := c.run(t, e, x)
			msg, _, _ := errBody(t, body)
			if rid := h.Get("X-Request-Id"); rid == "" || !strings.HasSuffix(msg, rid) {
				t.Errorf("the message %q does not end with the request id %q", msg, rid)
			}
			if x.wantStatus != 401 && h.Get("X-Should-Retry") != "false" {
				t.Errorf("%d without x-should-retry: false", x.wantStatus)
			}
		})
	}
}
