package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/lines"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/wire"
)

// twoAccounts: route standard served by two equal lines of each protocol,
// each its own sim — two upstream accounts with separate prompt caches.
func twoAccounts(c *config.Config) {
	c.Routes = []config.RouteConfig{{Name: "standard"}}
	c.Lines = []config.LineConfig{
		{Name: "a", Protocol: config.ProtocolOpenAI, Models: []string{"*"}, Route: "standard"},
		{Name: "b", Protocol: config.ProtocolOpenAI, Models: []string{"*"}, Route: "standard"},
		{Name: "ma", Protocol: config.ProtocolAnthropic, Models: []string{"*"}, Route: "standard"},
		{Name: "mb", Protocol: config.ProtocolAnthropic, Models: []string{"*"}, Route: "standard"},
	}
}

// longPrefix is a system prompt well over the 1,024 tokens a provider
// caches at least.
var longPrefix = strings.Repeat("You are a careful assistant working through a long shared context. ", 80)

// conversationCall is one call of a conversation: its path, body and
// headers.
type conversationCall struct {
	path string
	body string
	hdr  []string
}

// chatConversation is a chat call with a long prefix; key, when set, is
// its prompt_cache_key.
func chatConversation(key string, hdr ...string) conversationCall {
	m := map[string]any{"model": "modelf-flash", "messages": []any{
		map[string]any{"role": "system", "content": longPrefix},
		map[string]any{"role": "user", "content": "What next?"},
	}}
	if key != "" {
		m["prompt_cache_key"] = key
	}
	b, _ := json.Marshal(m)
	return conversationCall{"/v1/chat/completions", string(b), hdr}
}

// messagesConversation is a messages call whose system prompt, tag and a
// long prefix, is a cache breakpoint; userID, when set, its
// metadata.user_id.
func messagesConversation(tag, userID string, hdr ...string) conversationCall {
	m := map[string]any{"model": "modela-sonnet-5-5", "max_tokens": 50,
		"system":   []any{map[string]any{"type": "text", "text": tag + longPrefix, "cache_control": map[string]any{"type": "ephemeral"}}},
		"messages": []any{map[string]any{"role": "user", "content": "What next?"}},
	}
	if userID != "" {
		m["metadata"] = map[string]any{"user_id": userID}
	}
	b, _ := json.Marshal(m)
	return conversationCall{"/v1/messages", string(b), append([]string{"anthropic-version", "2023-06-01"}, hdr...)}
}

// converse sends the call n times and returns, per call, the line that
// answered it (the sim whose request count moved) and the cache-read
// tokens its charge was billed with.
func converse(t *testing.T, e *env, account string, cc conversationCall, n int) (lines []string, cacheRead []int64) {
	t.Helper()
	key := e.key(account, "standard")
	names := make([]string, 0, len(e.sims))
	for name := range e.sims {
		names = append(names, name)
	}
	slices.Sort(names)
	for i := 0; i < n; i++ {
		before := e.requests()
		st, _, data := e.do("POST", cc.path, key, cc.body, cc.hdr...)
		if st != 200 {
			t.Fatalf("call %d: %d %s", i+1, st, data)
		}
		after := e.requests()
		line := ""
		for _, name := range names {
			if after[name] != before[name] {
				line += name
			}
		}
		lines = append(lines, line)
	}
	es, err := e.charges(account, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range slices.Backward(es) { // oldest first
		if x.Kind == store.KindCharge {
			cacheRead = append(cacheRead, x.Usage.CacheReadTokens)
		}
	}
	if len(cacheRead) != n {
		t.Fatalf("%d charges for %d calls", len(cacheRead), n)
	}
	return lines, cacheRead
}

func (e *env) requests() map[string]int64 {
	out := map[string]int64{}
	for n, s := range e.sims {
		out[n] = s.Requests()
	}
	return out
}

// A conversation — a prompt_cache_key, an Anthropic metadata.user_id, a
// session_id or x-claude-code-session-id header — stays on the line that
// answered its first call: over two equal lines (two accounts, two prompt
// caches), the same long prefix sent ten times is billed at the
// cache-read price from the second call on. With affinity off the calls
// spread, and the first call on each line pays the full input price.
func TestConversationStaysOnOneLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t, twoAccounts)
	for i, tc := range []struct {
		name string
		cc   conversationCall
	}{
		{"prompt_cache_key", chatConversation("conv-7f3a")},
		{"metadata.user_id", messagesConversation("One. ", "user_42_session_9")},
		{"x-claude-code-session-id", messagesConversation("Two. ", "", "x-claude-code-session-id", "5d1c0b7e")},
		// The sim reports chat cache reads statelessly without a
		// prompt_cache_key: this one shows the line alone.
		{"session_id", chatConversation("", "session_id", "codex-session-1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			account := fmt.Sprintf("acct-%d", i)
			e.account(account, "10")
			lines, reads := converse(t, e, account, tc.cc, 10)
			for k, l := range lines {
				if l != lines[0] || e.sims[l] == nil {
					t.Fatalf("call %d went to %q, call 1 to %q: %v", k+1, l, lines[0], lines)
				}
			}
			if tc.name == "session_id" {
				return
			}
			if reads[0] != 0 {
				t.Fatalf("call 1 billed %d cache-read tokens", reads[0])
			}
			for k, r := range reads[1:] {
				if r == 0 {
					t.Fatalf("call %d billed no cache read: %v (lines %v)", k+2, reads, lines)
				}
			}
		})
	}

	t.Run("no affinity", func(t *testing.T) {
		e := newEnv(t, twoAccounts, func(c *config.Config) { c.Retry.AffinityTTL = -1 })
		e.account("acme", "10")
		const n = 20 // both lines are used but with probability 2^-19
		lines, reads := converse(t, e, "acme", chatConversation("conv-7f3a"), n)
		full := 0
		for _, r := range reads {
			if r == 0 {
				full++
			}
		}
		if !slices.Contains(lines, "a") || !slices.Contains(lines, "b") || full != 2 {
			t.Fatalf("lines %v; %d calls at the full input price, want 2 (the first on each line)", lines, full)
		}
	})
}

// When the remembered line fails, the call moves on as any call does, and
// the conversation sticks to the line that answered: its first call there
// pays the full input price (a new account's cache), the rest read the
// cache; the old line, healthy again, does not get the conversation back.
func TestAffinityMovesWhenTheLineFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, twoAccounts)
	e.account("acme", "10")
	cc := chatConversation("conv-moves")
	first, _ := converse(t, e, "acme", cc, 2)
	if first[0] != first[1] {
		t.Fatalf("calls 1 and 2 went to %v", first)
	}
	old := first[0]
	other := map[string]string{"a": "b", "b": "a"}[old]
	e.sims[old].SetOptions(sim.Options{Status: 500})
	e.account("acme2", "10")
	moved, _ := converse(t, e, "acme2", cc, 1)
	if moved[0] != "ab" {
		t.Fatalf("with %s failing the call went to %q, want to both (it first)", old, moved[0])
	}
	if n := e.sims[old].Requests(); n != 3 {
		t.Fatalf("the failing remembered line got %d requests in all, want 3 (it is tried first)", n)
	}
	e.sims[old].SetOptions(sim.Options{})
	e.account("acme3", "10")
	lines, reads := converse(t, e, "acme3", cc, 5)
	for k, l := range lines {
		if l != other {
			t.Fatalf("call %d after the move went to %q, want %s: %v", k+1, l, other, lines)
		}
	}
	for k, r := range reads {
		if r == 0 {
			t.Fatalf("call %d after the move billed no cache read: %v", k+1, reads)
		}
	}
}

// A remembered line whose answers become errors the caller gets (a 4xx
// its upstream account gives: out of credit, a revoked key) does not keep
// the conversation: such answers leave its breaker closed, so only the
// affinity can let go, and the conversation's later calls spread again.
func TestAffinityLetsGoOfALineAnswering4xx(t *testing.T) {
	t.Parallel()
	e := newEnv(t, twoAccounts)
	e.account("acme", "10")
	cc := chatConversation("conv-4xx")
	first, _ := converse(t, e, "acme", cc, 1)
	stuck := first[0]
	e.sims[stuck].SetOptions(sim.Options{Status: 400})
	key := e.key("acme", "standard")
	if st, _, data := e.do("POST", cc.path, key, cc.body); st != 400 {
		t.Fatalf("the remembered line answering 400: got %d %s", st, data)
	}
	// Later calls order the two lines at random again: in 20 of them the
	// healthy line answers some (all 20 on the failing one: 2^-20).
	ok := 0
	for i := 0; i < 20; i++ {
		if st, _, _ := e.do("POST", cc.path, key, cc.body); st == 200 {
			ok++
		}
	}
	if ok == 0 {
		t.Fatalf("every later call of the conversation went to %s, answering 400", stuck)
	}
}

// throttled fronts a sim: its first `times` requests are answered 429 with
// the given Retry-After, the rest by the sim.
func throttled(t *testing.T, retryAfter string, times int64) (url string, seen *atomic.Int64) {
	t.Helper()
	s := sim.New(sim.Options{})
	seen = &atomic.Int64{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= times {
			w.Header().Set("Retry-After", retryAfter)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`))
			return
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(s.Close)
	return hs.URL, seen
}

// A provider's 429 with a short Retry-After, when no other line can take
// the call, is waited out: the caller gets 200 after the wait, charged
// once. A Retry-After above retry.max_429_wait reaches the caller at once
// as 429 with it, uncharged. With another line the call moves to it
// without waiting. (A caller that goes away ends the wait: see
// lines.TestShort429WaitEndsWithCaller.)
func TestShort429IsWaitedOut(t *testing.T) {
	t.Parallel()
	t.Run("waited", testShort429Waited)
	t.Run("too long", testLong429NotWaited)
	t.Run("another line", test429OtherLineServes)
}

// oneLineEnv is a gateway whose one route has one line, on url, and a key
// of account acme (10 USD) on it.
func oneLineEnv(t *testing.T, url string) (*env, string) {
	t.Helper()
	e := newEnv(t, func(c *config.Config) {
		c.Routes = []config.RouteConfig{{Name: "standard"}}
		c.Lines = []config.LineConfig{{Name: "only", Protocol: config.ProtocolOpenAI, BaseURL: url, Models: []string{"*"}, Route: "standard"}}
	})
	e.account("acme", "10")
	return e, e.key("acme", "standard")
}

// testShort429Waited: a 429 with Retry-After 1 s is waited out and tried
// again on the same line; the call is answered and charged once.
func testShort429Waited(t *testing.T) {
	url, seen := throttled(t, "1", 1)
	e, key := oneLineEnv(t, url)
	t0 := time.Now()
	st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hello"))
	took := time.Since(t0)
	if st != 200 || took < time.Second || took > 8*time.Second {
		t.Fatalf("status %d after %v (want 200 after about 1 s): %s", st, took, data)
	}
	if n := seen.Load(); n != 2 {
		t.Fatalf("the line saw %d requests, want 2", n)
	}
	if _, kinds := journalSum(t, e, "acme"); kinds[store.KindCharge] != 1 {
		t.Fatalf("journal %v: want one charge", kinds)
	}
	if n := gatherCounter(e.gw, "relay_upstream_429_waited_total"); n != 1 {
		t.Fatalf("relay_upstream_429_waited_total %v, want 1", n)
	}
}

// testLong429NotWaited: a 429 with Retry-After 20 s is passed on at once,
// uncharged.
func testLong429NotWaited(t *testing.T) {
	url, seen := throttled(t, "20", 1<<30)
	e, key := oneLineEnv(t, url)
	t0 := time.Now()
	st, hdr, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hello"))
	took := time.Since(t0)
	if st != 429 || hdr.Get("Retry-After") != "20" || took > 5*time.Second {
		t.Fatalf("status %d, Retry-After %q after %v (want 429, 20, at once): %s", st, hdr.Get("Retry-After"), took, data)
	}
	if n := seen.Load(); n != 1 {
		t.Fatalf("the line saw %d requests, want 1", n)
	}
	if b := e.balance("acme"); b.Balance.Fixed() != "10.000000000" || b.Held != 0 {
		t.Fatalf("balance %s held %s: the 429 was charged", b.Balance.Fixed(), b.Held.Fixed())
	}
}

// test429OtherLineServes: another line of the route answers rather than
// waiting out a 5 s Retry-After.
func test429OtherLineServes(t *testing.T) {
	url, seen := throttled(t, "5", 1<<30)
	e := newEnv(t, func(c *config.Config) {
		c.Routes = []config.RouteConfig{{Name: "standard"}}
		c.Lines = []config.LineConfig{
			{Name: "busy", Protocol: config.ProtocolOpenAI, BaseURL: url, Models: []string{"*"}, Route: "standard"},
			{Name: "spare", Protocol: config.ProtocolOpenAI, Models: []string{"*"}, Route: "standard", Priority: 1},
		}
	})
	e.account("acme", "10")
	key := e.key("acme", "standard")
	t0 := time.Now()
	st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hello"))
	took := time.Since(t0)
	if st != 200 || took > 4*time.Second {
		t.Fatalf("status %d after %v (want 200 without the 5 s wait): %s", st, took, data)
	}
	if seen.Load() != 1 || e.sims["spare"].Requests() != 1 {
		t.Fatalf("busy saw %d, spare %d requests; want 1 and 1", seen.Load(), e.sims["spare"].Requests())
	}
}

// The identity is read from prompt_cache_key (chat, responses),
// metadata.user_id (messages), else the session_id or
// x-claude-code-session-id header; only its hash is kept; a non-string is
// a 400 naming the field.
func TestConversationIdentity(t *testing.T) {
	t.Parallel()
	conv := func(dec func([]byte) (*wire.Summary, error), body string, hdr ...string) uint64 {
		t.Helper()
		s, err := dec([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return lines.Conversation(s.Conv, r.Header)
	}
	chat := func(extra string) string { return chatBody("m", "hi", extra) }
	msgs := func(extra string) string {
		return `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	k1 := conv(wire.DecodeChat, chat(`"prompt_cache_key":"k1"`))
	if k1 == 0 || k1 != conv(wire.DecodeResponses, `{"model":"m","input":"x","prompt_cache_key":"k1"}`) ||
		k1 == conv(wire.DecodeChat, chat(`"prompt_cache_key":"k2"`)) {
		t.Fatal("prompt_cache_key is not the identity")
	}
	if conv(wire.DecodeChat, chat(`"prompt_cache_key":""`)) != 0 || conv(wire.DecodeChat, chat(`"prompt_cache_key":null`)) != 0 {
		t.Fatal("an empty prompt_cache_key is an identity")
	}
	u := conv(wire.DecodeMessages, msgs(`,"metadata":{"user_id":"u1"}`))
	if u == 0 || u != conv(wire.DecodeMessages, msgs(`,"metadata":{"user_id":"u1","x":1}`)) || conv(wire.DecodeMessages, msgs(`,"metadata":{}`)) != 0 {
		t.Fatal("metadata.user_id is not the identity")
	}
	h := conv(wire.DecodeChat, chat(`"stream":false`), "session_id", "s1")
	if h == 0 || h != conv(wire.DecodeMessages, msgs(""), "x-claude-code-session-id", "s1") || conv(wire.DecodeChat, chat(`"stream":false`)) != 0 {
		t.Fatal("the session headers are not the identity")
	}
	if conv(wire.DecodeChat, chat(`"prompt_cache_key":"k1"`), "session_id", "s1") != k1 {
		t.Fatal("the header wins over the body's identity")
	}
	for _, tc := range []struct {
		dec   func([]byte) (*wire.Summary, error)
		body  string
		field string
	}{
		{wire.DecodeChat, chat(`"prompt_cache_key":7`), "prompt_cache_key"},
		{wire.DecodeResponses, `{"model":"m","input":"x","prompt_cache_key":{}}`, "prompt_cache_key"},
		{wire.DecodeMessages, msgs(`,"metadata":{"user_id":5}`), "metadata.user_id"},
		{wire.DecodeMessages, msgs(`,"metadata":"x"`), "metadata"},
	} {
		_, err := tc.dec([]byte(tc.body))
		if e := apierr.From(err); err == nil || e.Status != 400 || !strings.Contains(e.Message, tc.field) {
			t.Errorf("%s: %v, want a 400 naming %s", tc.body, err, tc.field)
		}
	}
}

// gatherCounter is the value of counter name on gw's registry.
func gatherCounter(gw *Gateway, name string) float64 {
	mfs, _ := gw.met.reg.Gather()
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
