package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/internal/testwait"
	"github.com/modelrelay/modelrelay/plugins"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/wire"
)

// journalSum is credits + Σ journal amounts of an account, once its
// answered calls have settled (as e.charges reads it).
func journalSum(t testing.TB, e *env, account string) (sum pricing.Nano, kinds map[string]int) {
	t.Helper()
	es, err := e.charges(account, 100000)
	if err != nil {
		t.Fatal(err)
	}
	kinds = map[string]int{}
	for _, e := range es {
		sum += e.Amount
		kinds[e.Kind]++
	}
	return sum, kinds
}

// expectedCharge prices usage with the plugin the gateway uses.
func expectedCharge(t testing.TB, e *env, model, route string, u pricing.Usage) pricing.Nano {
	t.Helper()
	res, err := e.host.Settle(context.Background(), abi.SettleRequest{Model: model, Route: route, Endpoint: pricing.EndpointChat, Usage: plugins.UsageToABI(u)})
	if err != nil {
		t.Fatal(err)
	}
	return pricing.Nano(res.Charge)
}

func TestChargeMatchesUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "economy")
	body := chatBody("modelf-flash", "a question worth a few tokens", `"max_tokens":50`)
	st, _, data := e.do("POST", "/v1/chat/completions", key, body)
	if st != 200 {
		t.Fatalf("%d %s", st, data)
	}
	u, ok, err := wire.ChatUsage(data)
	if err != nil || !ok {
		t.Fatalf("usage: %v %v", ok, err)
	}
	want := expectedCharge(t, e, "modelf-flash", "economy", u)
	if want <= 0 {
		t.Fatalf("charge %d", want)
	}
	b := e.balance("acme")
	if b.Balance != 5*pricing.NanoPerUSD-want || b.Held != 0 {
		t.Fatalf("balance %s held %s, want %s charged", b.Balance.Fixed(), b.Held.Fixed(), want.Fixed())
	}
	es, _ := e.charges("acme", 10)
	if len(es) < 1 || es[0].Kind != store.KindCharge || es[0].Usage != u || es[0].Model != "modelf-flash" || es[0].Route != "economy" {
		t.Fatalf("journal %+v", es)
	}
}

func TestEmptyBalanceIs402(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("broke", "")
	e.account("poor", "0.000001")
	for _, acct := range []string{"broke", "poor"} {
		key := e.key(acct, "auto")
		st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody("modela-opus-5-5", "hi", `"max_tokens":4000`))
		if st != 402 {
			t.Fatalf("%s: status %d %s", acct, st, data)
		}
		msg, _, _ := errBody(t, data)
		if !strings.Contains(msg, "needs up to") || !strings.Contains(msg, "USD") {
			t.Errorf("402 must say what was needed: %q", msg)
		}
	}
}

// 200 concurrent streamed calls against credit for a handful: exactly the
// covered number are admitted, the books balance to the nano-USD and no hold
// remains.
func TestConcurrentStreamsCannotOverdraw(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, s := range e.sims {
		s.SetOptions(sim.Options{FirstChunk: 1500 * time.Millisecond, Chunks: 4})
	}
	body := chatBody("modelf-flash", "concurrency", `"max_tokens":1000`, `"stream":true`)
	q, err := e.host.Admit(context.Background(), abi.AdmitRequest{
		Endpoint: pricing.EndpointChat, Model: "modelf-flash", Route: "economy",
		InputTokens: holdInputTokens(len(body)), MaxOutputTokens: 1000, DefaultOutputTokens: 4096, Stream: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	hold := pricing.Nano(q.Hold)
	const admittable = 5
	credit := admittable*hold + hold/2
	e.account("acme", credit.String())
	key := e.key("acme", "economy")

	const n = 200
	var ok, denied, other atomic.Int64
	var otherMu sync.Mutex
	var others []string
	note := func(s string) { otherMu.Lock(); others = append(others, s); otherMu.Unlock(); other.Add(1) }
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				note(err.Error())
				return
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			switch resp.StatusCode {
			case 200:
				ok.Add(1)
			case 402:
				denied.Add(1)
			default:
				note(fmt.Sprintf("%d %s", resp.StatusCode, data))
			}
		}()
	}
	close(start)
	wg.Wait()
	if ok.Load() != admittable || denied.Load() != n-admittable || other.Load() != 0 {
		for _, l := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(l, "plugin") && strings.Contains(l, "ERROR") {
				t.Log(l)
			}
		}
		t.Fatalf("admitted %d, denied %d, other %d %q; want %d admitted", ok.Load(), denied.Load(), other.Load(), others, admittable)
	}
	b := e.balance("acme")
	sum, kinds := journalSum(t, e, "acme")
	if b.Balance != sum || b.Held != 0 {
		t.Fatalf("balance %s, journal sum %s, held %s", b.Balance.Fixed(), sum.Fixed(), b.Held.Fixed())
	}
	if kinds[store.KindCharge] != admittable || kinds[store.KindCredit] != 1 {
		t.Fatalf("journal kinds %v", kinds)
	}
	holds, err := e.store.OpenHolds(context.Background())
	if err != nil || len(holds) != 0 {
		t.Fatalf("open holds %v %v", holds, err)
	}
}

// A stream that is cut is settled once from the documented estimate, never at
// zero, and the client sees the cut.
func TestCutStreamSettledOnceFromEstimate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sims["eco-a"].SetOptions(sim.Options{CutAfter: 3, Chunks: 8})
	e.account("acme", "5")
	key := e.key("acme", "economy")
	req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(chatBody("modelf-flash", "cut me", `"stream":true`)))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			events++
			if sc.Text() == "data: [DONE]" {
				t.Error("a cut stream must not end with [DONE]")
			}
		}
	}
	resp.Body.Close()
	// The sim's CutAfter counts content chunks: the opening role chunk and
	// 3 content chunks reach the client, then the cut.
	if events != 4 {
		t.Errorf("client saw %d events, want the 4 sent before the cut", events)
	}
	if sc.Err() == nil {
		t.Error("the client should see the cut as a read error, not a clean end")
	}
	testwait.For(t, 10*time.Second, "the hold released", func() bool { return e.balance("acme").Held == 0 })
	_, kinds := journalSum(t, e, "acme")
	es, _ := e.charges("acme", 10)
	if kinds[store.KindCharge] != 1 || es[0].Amount >= 0 || !strings.Contains(es[0].Note, "estimated") {
		t.Fatalf("want one estimated, non-zero charge: %+v", es[0])
	}
	if e.sims["eco-a"].Requests() != 1 {
		t.Errorf("a started stream must never be retried: sim saw %d requests", e.sims["eco-a"].Requests())
	}
}

// After calls whose prompt and completion carry a canary, the canary is
// nowhere under the data directory or in the logs; neither is the key.
func TestNoContentAtRest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "auto")
	canary := fmt.Sprintf("CANARY-%d-zebra", time.Now().UnixNano())
	for _, extra := range [][]string{nil, {`"stream":true`}, {`"stream":true`, `"stream_options":{"include_usage":true}`}} {
		st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelb-6-astra", "please repeat "+canary, extra...))
		if st != 200 || !strings.Contains(string(data), canary) {
			t.Fatalf("the completion should echo the canary: %d %s", st, data)
		}
	}
	e.sims["std-a"].SetOptions(sim.Options{CutAfter: 2})
	e.do("POST", "/v1/chat/completions", key, chatBody("modela-opus-5-5", canary, `"stream":true`))
	e.do("POST", "/v1/chat/completions", key, `{"model":"`+canary+`","messages":[]}`)

	e.srv.Close()
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	rest := e.atRest(t)
	for _, secret := range []string{canary, key} {
		for where, b := range rest {
			if strings.Contains(string(b), secret) {
				t.Errorf("%q found at rest in %s", secret[:10], where)
			}
		}
		if strings.Contains(e.logs.String(), secret) {
			t.Errorf("%q found in the logs", secret[:10])
		}
	}
	// The scan must be able to find things: the model id is at rest.
	found := false
	for _, b := range rest {
		found = found || strings.Contains(string(b), "modelb-6-astra")
	}
	if !found {
		t.Fatal("the journal's model name was not found at rest: the scan proves nothing")
	}
}

// Graceful drain: a stream in flight when the gateway drains finishes and is
// settled.
func TestDrainWaitsForStreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sims["eco-a"].SetOptions(sim.Options{ChunkGap: 50 * time.Millisecond, Chunks: 6})
	e.account("acme", "5")
	key := e.key("acme", "economy")
	done := make(chan int, 1)
	go func() {
		st, _, _ := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "drain", `"stream":true`))
		done <- st
	}()
	testwait.For(t, 10*time.Second, "a hold taken", func() bool { return e.balance("acme").Held > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.gw.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if st := <-done; st != 200 {
		t.Fatalf("stream status %d", st)
	}
	if b := e.balance("acme"); b.Held != 0 || b.Balance >= 5*pricing.NanoPerUSD {
		t.Fatalf("stream not settled: %+v", b)
	}
	st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "late"))
	if st != 503 {
		t.Fatalf("after drain: %d %s", st, data)
	}
}
