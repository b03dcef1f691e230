package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/holder"
	"github.com/modelrelay/modelrelay/internal/testwait"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/store"
)

// holderGet GETs path with key, wants 200 and decodes the answer into v.
func holderGet(t *testing.T, e *env, key, path string, v any) http.Header {
	t.Helper()
	st, h, data := e.do("GET", path, key, nil)
	if st != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, st, data)
	}
	if h.Get("Cache-Control") != "no-store" || h.Get("X-Request-Id") == "" {
		t.Errorf("GET %s: Cache-Control %q, X-Request-Id %q", path, h.Get("Cache-Control"), h.Get("X-Request-Id"))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, data)
	}
	return h
}

// editForm is a multipart image edit of one image of model.
func editForm(model string) (contentType string, body []byte) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("model", model)
	_ = mw.WriteField("prompt", "make it blue")
	_ = mw.WriteField("size", "1024x1024")
	fw, _ := mw.CreateFormFile("image", "in.png")
	_, _ = fw.Write([]byte("\x89PNG\r\n\x1a\nnot really a picture"))
	_ = mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// holderCall is one call of the mix, as its client saw it.
type holderCall struct {
	name   string
	rid    string // X-Request-Id
	cost   string // x-relay-cost-usd; "" on a stream
	status int
}

// callMix makes a JSON, streamed, cut-stream, image, image edit, video,
// typed-question, messages, responses and failed call on account acme
// (keyStd on route standard; keyEco on route economy, whose line cuts
// every stream after 3 chunks), and a video job that fails and is
// refunded.
func callMix(t *testing.T, e *env, keyStd, keyEco string) []holderCall {
	t.Helper()
	var calls []holderCall
	call := func(name, key, path string, body any, hdr ...string) holderCall {
		t.Helper()
		st, h, data := e.do("POST", path, key, body, hdr...)
		c := holderCall{name: name, rid: h.Get("X-Request-Id"), cost: h.Get(costHeader), status: st}
		if c.rid == "" {
			t.Fatalf("%s: no X-Request-Id", name)
		}
		if st != http.StatusOK && name != "failed" {
			t.Fatalf("%s: %d %s", name, st, data)
		}
		calls = append(calls, c)
		return c
	}
	call("chat", keyStd, "/v1/chat/completions", chatBody("modela-sonnet-5-5", "Say hello", `"max_tokens":32`))
	call("chat stream", keyStd, "/v1/chat/completions", chatBody("modelf-flash", "Stream please", `"stream":true`))
	call("cut stream", keyEco, "/v1/chat/completions", chatBody("modelf-flash", "Cut me off", `"stream":true`))
	call("messages", keyStd, "/v1/messages", `{"model":"modela-fable-5-1","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
		"anthropic-version", "2023-06-01")
	call("responses", keyStd, "/v1/responses", `{"model":"modelb-6-astra","input":"Write one line","max_output_tokens":50}`)
	call("image", keyStd, "/v1/images/generations", `{"model":"modelb-image-2.5-flare","prompt":"a red kite","size":"1024x1024","n":2}`)
	ct, form := editForm("modelb-image-2.5-sunburst")
	call("image edit", keyStd, "/v1/images/edits", form, "Content-Type", ct)
	call("video", keyStd, "/v1/videos/generations", `{"model":"modelc-imagine-video-1.5","prompt":"waves","duration":2,"resolution":"720p"}`)
	call("typed question", keyStd, "/v1/systemone", `{"model":"sysmodel-latest","state":"The user asked twice for a refund.","questions":{"refund":{"type":"noul"}}}`)

	// A video job that fails: charged at acceptance, refunded by the poll
	// that sees the failure.
	st, _, data := e.do("POST", "/v1/videos/generations", keyEco, `{"model":"modelc-imagine-video-1.5","prompt":"[fail] a storm","duration":3}`)
	var job struct {
		RequestID string `json:"request_id"`
	}
	if st != 200 || json.Unmarshal(data, &job) != nil {
		t.Fatalf("failing video: %d %s", st, data)
	}
	testwait.For(t, 10*time.Second, "the video job failed", func() bool {
		_, _, data := e.do("GET", "/v1/videos/"+job.RequestID, keyEco, nil)
		return strings.Contains(string(data), `"failed"`)
	})

	// A call the provider refuses: its hold is released, uncharged.
	s := e.sims["std-a"]
	opts := s.Options()
	failing := opts
	failing.Status = http.StatusBadRequest
	s.SetOptions(failing)
	if c := call("failed", keyStd, "/v1/chat/completions", chatBody("modelc-4.7", "refuse me")); c.status != http.StatusBadRequest {
		t.Fatalf("failed call: %d", c.status)
	}
	s.SetOptions(opts)
	return calls
}

// holderEnv is an env with accounts acme (keys on routes standard and
// economy; the economy line cuts every stream) and beta.
func holderEnv(t *testing.T) (e *env, keyStd, keyEco, keyBeta string) {
	t.Helper()
	cut := httptest.NewServer(sim.New(sim.Options{CutAfter: 3, Chunks: 8, VideoSteps: 20 * time.Millisecond}))
	t.Cleanup(cut.Close)
	e = newEnv(t, func(c *config.Config) { c.Lines[2].BaseURL = cut.URL }) // eco-a
	needModels(t, e, "modelb-image-2.5-flare", "modelc-imagine-video-1.5", "sysmodel-latest")
	e.account("acme", "50")
	e.account("beta", "5")
	return e, e.key("acme", "standard"), e.key("acme", "economy"), e.key("beta", "standard")
}

// keyID is the id of the key whose plaintext is plain.
func keyID(t *testing.T, e *env, plain string) store.Key {
	t.Helper()
	k, err := e.store.KeyByHash(context.Background(), store.HashKey(plain))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestHolderReadsMatchJournal: after a mix of calls, every call's
// generation, the key, the subscription and the usage read exactly what the
// journal holds; the cost header of every JSON answer is its journal charge.
func TestHolderReadsMatchJournal(t *testing.T) {
	t.Parallel()
	e, keyStd, keyEco, keyBeta := holderEnv(t)
	ctx := context.Background()
	std := keyID(t, e, keyStd)
	limit, reset := pricing.Nano(30*pricing.NanoPerUSD), store.ResetNever
	if _, err := e.store.UpdateKey(ctx, std.ID, store.KeyUpdate{Limit: &limit, Reset: &reset}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.SetAlert(ctx, "acme", 100*pricing.NanoPerUSD); err != nil {
		t.Fatal(err)
	}
	calls := callMix(t, e, keyStd, keyEco)

	entries, err := e.charges("acme", 100000)
	if err != nil {
		t.Fatal(err)
	}
	charges := map[string]store.Entry{}
	var spentStd, total pricing.Nano
	refunds := 0
	for _, x := range entries {
		switch x.Kind {
		case store.KindCharge:
			charges[x.RequestID] = x
			if x.KeyID == std.ID {
				spentStd -= x.Amount
			}
			total -= x.Amount
		case store.KindRefund:
			refunds++
			total -= x.Amount
		}
	}
	if refunds != 1 {
		t.Fatalf("%d refunds, want 1", refunds)
	}
	t.Run("generations", func(t *testing.T) { checkGenerations(t, e, calls, charges, keyStd, keyEco, keyBeta) })
	t.Run("key", func(t *testing.T) { checkKey(t, e, keyStd, limit, spentStd) })
	t.Run("subscription", func(t *testing.T) { checkSubscription(t, e, keyStd, keyEco) })
	t.Run("usage", func(t *testing.T) { checkUsage(t, e, keyStd, keyEco, total) })
}

func checkGenerations(t *testing.T, e *env, calls []holderCall, charges map[string]store.Entry, keyStd, keyEco, keyBeta string) {
	for _, c := range calls {
		var g holder.GenerationInfo
		holderGet(t, e, keyEco, "/v1/generations/"+c.rid, &g) // any key of the account
		if c.name == "failed" {
			if g.Status != store.OutcomeReleased || g.ChargeUSD != "0.000000000" || g.Usage != (pricing.Usage{}) || g.Model != "modelc-4.7" {
				t.Errorf("failed call: %+v", g)
			}
			continue
		}
		x, ok := charges[c.rid]
		if !ok {
			t.Fatalf("%s: no charge for %s", c.name, c.rid)
		}
		want := holder.GenerationInfo{
			Object: "generation", ID: c.rid, KeyID: x.KeyID, Model: x.Model, Endpoint: x.Endpoint, Route: x.Route,
			Status: store.OutcomeSettled, Usage: x.Usage, ChargeUSD: (-x.Amount).Fixed(), HoldUSD: x.HoldAmount.Fixed(),
			Estimated: store.Estimated(x.Note), Note: x.Note, Created: g.Created,
		}
		if g != want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, g, want)
		}
		if _, err := time.Parse(time.RFC3339Nano, g.Created); err != nil {
			t.Errorf("%s: created %q: %v", c.name, g.Created, err)
		}
		if (c.name == "cut stream") != g.Estimated {
			t.Errorf("%s: estimated %v", c.name, g.Estimated)
		}
		if c.name != "chat stream" && c.name != "cut stream" && c.cost != want.ChargeUSD {
			t.Errorf("%s: x-relay-cost-usd %q, journal %s", c.name, c.cost, want.ChargeUSD)
		}
	}
	// Another account's call and an unknown id: the same 404.
	rid := calls[0].rid
	st, h, data := e.do("GET", "/v1/generations/"+rid, keyBeta, nil)
	msg, typ, code := errBody(t, data)
	if st != http.StatusNotFound || typ != "not_found_error" || code != "not_found" {
		t.Fatalf("another account's call: %d %s", st, data)
	}
	unknown := "req_" + strings.Repeat("0", len(rid)-4)
	st2, h2, data2 := e.do("GET", "/v1/generations/"+unknown, keyStd, nil)
	msg2, _, _ := errBody(t, data2)
	strip := func(msg, id, reqID string) string {
		return strings.NewReplacer(id, "ID", reqID, "RID").Replace(msg)
	}
	if st2 != http.StatusNotFound || strip(msg, rid, h.Get("X-Request-Id")) != strip(msg2, unknown, h2.Get("X-Request-Id")) {
		t.Errorf("unknown id: %d %q; another account's: %q", st2, msg2, msg)
	}
	if st, _, _ := e.do("GET", "/v1/generations/"+strings.Repeat("x", 4000), keyStd, nil); st != http.StatusNotFound {
		t.Errorf("a long id: %d", st)
	}
	if st, _, _ := e.do("GET", "/v1/generations/"+rid, "", nil); st != http.StatusUnauthorized {
		t.Errorf("no key: %d", st)
	}
}

func checkKey(t *testing.T, e *env, keyStd string, limit, spent pricing.Nano) {
	k := keyID(t, e, keyStd)
	a := e.balance("acme")
	var got holder.KeyInfo
	holderGet(t, e, keyStd, "/v1/key", &got)
	lim, rem, alert := limit.Fixed(), (limit - spent).Fixed(), pricing.Nano(100*pricing.NanoPerUSD).Fixed()
	want := holder.KeyInfo{
		Object: "key", ID: k.ID, Route: "standard", Created: timeText(k.Created), LimitUSD: &lim,
		LimitReset: "none", PeriodStart: timeText(k.Created), SpentUSD: spent.Fixed(), RemainingUSD: &rem,
		HeldUSD: "0.000000000",
		Account: holder.AccountInfo{ID: "acme", BalanceUSD: a.Balance.Fixed(), HeldUSD: "0.000000000",
			AvailableUSD: a.Balance.Fixed(), AlertBelow: &alert, LowBalance: true},
	}
	if spent <= 0 || a.Held != 0 {
		t.Fatalf("spent %s, held %s", spent, a.Held)
	}
	if g, w := jsonText(got), jsonText(want); g != w {
		t.Errorf("GET /v1/key:\n got %s\nwant %s", g, w)
	}
}

// jsonText is v as JSON, for comparing and showing answers.
func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func checkSubscription(t *testing.T, e *env, keyStd, keyEco string) {
	ctx := context.Background()
	expires := time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC)
	eco := keyID(t, e, keyEco)
	if _, err := e.store.UpdateKey(ctx, eco.ID, store.KeyUpdate{Expires: &expires}); err != nil {
		t.Fatal(err)
	}
	a := e.balance("acme")
	for _, tc := range []struct {
		key   string
		want  pricing.Nano
		until int64
	}{
		{keyStd, min(a.Available(), keyID(t, e, keyStd).RemainingAt(time.Now())), 0},
		{keyEco, a.Available(), expires.Unix()},
	} {
		var got map[string]any
		holderGet(t, e, tc.key, "/v1/dashboard/billing/subscription", &got)
		n := json.Number(tc.want.String())
		want := map[string]any{"object": "billing_subscription", "has_payment_method": true, "soft_limit_usd": n,
			"hard_limit_usd": n, "system_hard_limit_usd": n, "access_until": json.Number(fmt.Sprint(tc.until))}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("subscription:\n got %v\nwant %v", got, want)
		}
	}
}

func checkUsage(t *testing.T, e *env, keyStd, keyEco string, total pricing.Nano) {
	today := time.Now().UTC().Truncate(24 * time.Hour)
	day := func(d int) string { return today.AddDate(0, 0, d).Format(time.DateOnly) }
	for _, tc := range []struct {
		key, start, end string
		want            pricing.Nano
	}{
		{keyStd, day(-1), day(2), total},
		{keyEco, day(-99), day(1), total}, // 100 days: the most
		{keyStd, "2020-01-01", "2020-02-01", 0},
		{keyStd, day(2), day(3), 0},
	} {
		var got map[string]any
		holderGet(t, e, tc.key, "/v1/dashboard/billing/usage?start_date="+tc.start+"&end_date="+tc.end, &got)
		want := map[string]any{"object": "list", "total_usage": holder.CentsNumber(tc.want)}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("usage %s..%s: got %v, want %v", tc.start, tc.end, got, want)
		}
	}
	if total <= 0 {
		t.Fatalf("total %s", total)
	}
}

// costRequest is a charged call to make.
type costRequest struct {
	path string
	body any
	hdr  []string
}

// costRequests is a call of every model of the catalogue on each of its
// endpoints.
func costRequests(t *testing.T, e *env) []costRequest {
	var reqs []costRequest
	add := func(path string, body any, hdr ...string) { reqs = append(reqs, costRequest{path, body, hdr}) }
	for _, m := range e.host.Catalog().Models() {
		for _, ep := range m.Endpoints {
			switch ep {
			case pricing.EndpointChat:
				add("/v1/chat/completions", chatBody(m.ID, "Say hello", `"max_tokens":32`))
			case pricing.EndpointResponses:
				add("/v1/responses", fmt.Sprintf(`{"model":%q,"input":"Write one line"}`, m.ID))
				add("/v1/responses/compact", fmt.Sprintf(`{"model":%q,"input":[{"role":"user","content":"a long talk"}]}`, m.ID))
			case pricing.EndpointMessages:
				add("/v1/messages", fmt.Sprintf(`{"model":%q,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, m.ID),
					"anthropic-version", "2023-06-01")
			case pricing.EndpointImages:
				add("/v1/images/generations", fmt.Sprintf(`{"model":%q,"prompt":"a kite","size":"2048x1536","n":3}`, m.ID))
			case pricing.EndpointImageEdit:
				ct, form := editForm(m.ID)
				add("/v1/images/edits", form, "Content-Type", ct)
			case pricing.EndpointVideo:
				add("/v1/videos/generations", fmt.Sprintf(`{"model":%q,"prompt":"waves","duration":3,"resolution":"1080p"}`, m.ID))
			case pricing.EndpointSystemOne:
				add("/v1/systemone", fmt.Sprintf(`{"model":%q,"state":"It rained.","questions":{"q":{"type":"noul"}}}`, m.ID))
			default:
				t.Errorf("model %s: endpoint %s is not covered by this test", m.ID, ep)
			}
		}
	}
	return reqs
}

// TestCostHeaderEveryModel: the x-relay-cost-usd of every text model on
// each of its endpoints, and of every media endpoint, is the charge the
// journal records for that request id; streams carry the request id only.
func TestCostHeaderEveryModel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "500")
	key := e.key("acme", store.AutoRoute)
	reqs := costRequests(t, e)
	costs := map[string]string{}
	seen := map[string]bool{}
	for _, r := range reqs {
		st, h, data := e.do("POST", r.path, key, r.body, r.hdr...)
		if st != http.StatusOK {
			t.Fatalf("%s: %d %s", r.path, st, data)
		}
		rid, cost := h.Get("X-Request-Id"), h.Get(costHeader)
		if rid == "" || cost == "" {
			t.Fatalf("%s: X-Request-Id %q, x-relay-cost-usd %q", r.path, rid, cost)
		}
		costs[rid] = cost
		seen[r.path] = true
	}
	for _, p := range []string{"/v1/chat/completions", "/v1/responses", "/v1/responses/compact", "/v1/messages",
		"/v1/images/generations", "/v1/images/edits", "/v1/videos/generations", "/v1/systemone"} {
		if !seen[p] {
			t.Errorf("no call to %s: the catalogue lacks its models", p)
		}
	}
	es, err := e.charges("acme", 100000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, x := range es {
		if x.Kind != store.KindCharge {
			continue
		}
		n++
		if got := costs[x.RequestID]; got != (-x.Amount).Fixed() {
			t.Errorf("%s %s (%s): x-relay-cost-usd %q, journal %s", x.Endpoint, x.Model, x.RequestID, got, (-x.Amount).Fixed())
		}
	}
	if n != len(reqs) {
		t.Errorf("%d charges for %d calls", n, len(reqs))
	}

	// A stream: its request id, no cost (it is not known when the headers go).
	st, h, _ := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hi", `"stream":true`))
	if st != http.StatusOK || h.Get("X-Request-Id") == "" || h.Get(costHeader) != "" {
		t.Errorf("stream: %d, X-Request-Id %q, x-relay-cost-usd %q", st, h.Get("X-Request-Id"), h.Get(costHeader))
	}
	// An uncharged call carries none either.
	st, h, _ = e.do("POST", "/v1/messages/count_tokens", key, `{"model":"modela-fable-5-1","messages":[{"role":"user","content":"x"}]}`,
		"anthropic-version", "2023-06-01")
	if st != http.StatusOK || h.Get(costHeader) != "" {
		t.Errorf("count_tokens: %d, x-relay-cost-usd %q", st, h.Get(costHeader))
	}
}

// An upstream's own x-relay-cost-usd (another relay in front of the
// provider) never reaches the client: the header is the gateway's charge.
func TestCostHeaderNotFromUpstream(t *testing.T) {
	t.Parallel()
	s := sim.New(sim.Options{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(costHeader, "999.000000000")
		s.ServeHTTP(w, r)
	}))
	defer up.Close()
	e := newEnv(t, func(c *config.Config) { c.Lines[2].BaseURL = up.URL }) // eco-a
	e.account("acme", "5")
	key := e.key("acme", "economy")
	st, h, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hi"))
	if st != http.StatusOK {
		t.Fatalf("%d %s", st, data)
	}
	if got, want := h.Values(costHeader), (-lastCharge(t, e, "acme").Amount).Fixed(); len(got) != 1 || got[0] != want {
		t.Errorf("x-relay-cost-usd %q, want [%s]", got, want)
	}
	// A browser page may read it.
	req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(chatBody("modelf-flash", "hi")))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Origin", "https://app.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), costHeader) {
		t.Errorf("Access-Control-Expose-Headers %q", resp.Header.Get("Access-Control-Expose-Headers"))
	}
}

// GET /v1/key of a fresh key: no limit, no spend, the account's credit; a
// daily period starts today and resets tomorrow. It reads the key from
// the store, not the key cache.
func TestHolderKeyFresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "7.25")
	key := e.key("acme", "economy")
	var got holder.KeyInfo
	holderGet(t, e, key, "/v1/key", &got)
	if got.LimitUSD != nil || got.RemainingUSD != nil || got.ResetsAt != nil || got.Expires != nil || got.LimitReset != "none" ||
		got.SpentUSD != "0.000000000" || got.Account.BalanceUSD != "7.250000000" || got.Account.AvailableUSD != "7.250000000" ||
		got.Account.AlertBelow != nil || got.Account.LowBalance {
		t.Errorf("a fresh key: %+v", jsonText(got))
	}
	if st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hi")); st != 200 {
		t.Fatalf("%d %s", st, data)
	}
	charge := -lastCharge(t, e, "acme").Amount
	holderGet(t, e, key, "/v1/key", &got) // at once: the answer's settle is waited for
	if want := (7_250_000_000 - charge).Fixed(); got.Account.BalanceUSD != want {
		t.Errorf("balance %s after the call, want %s", got.Account.BalanceUSD, want)
	}

	// Settings changed in the store show at once, whatever the key cache holds.
	k := keyID(t, e, key)
	limit, reset := pricing.Nano(2*pricing.NanoPerUSD), store.ResetDaily
	if _, err := e.store.UpdateKey(context.Background(), k.ID, store.KeyUpdate{Limit: &limit, Reset: &reset}); err != nil {
		t.Fatal(err)
	}
	holderGet(t, e, key, "/v1/key", &got)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	if got.LimitUSD == nil || *got.LimitUSD != "2.000000000" || got.LimitReset != "daily" || got.PeriodStart != timeText(today) ||
		got.ResetsAt == nil || *got.ResetsAt != timeText(today.AddDate(0, 0, 1)) {
		t.Errorf("after UpdateKey: %+v", jsonText(got))
	}
	// A key revoked in the store is refused at once.
	if _, err := e.store.RevokeKey(context.Background(), k.ID); err != nil {
		t.Fatal(err)
	}
	if st, _, data := e.do("GET", "/v1/key", key, nil); st != http.StatusUnauthorized {
		t.Errorf("revoked key: %d %s", st, data)
	}
	if st, _, _ := e.do("GET", "/v1/key", "", nil); st != http.StatusUnauthorized {
		t.Errorf("no key: %d", st)
	}
}

// Bad dates of a usage read are a 400 naming the field.
func TestHolderUsageBadQuery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "1")
	key := e.key("acme", "economy")
	for _, tc := range []struct{ query, field string }{
		{"", "start_date"},
		{"?end_date=2026-01-02", "start_date"},
		{"?start_date=2026-01-01", "end_date"},
		{"?start_date=2026-1-1&end_date=2026-01-02", "start_date"},
		{"?start_date=2026-01-01&end_date=2026-02-30", "end_date"},
		{"?start_date=2026-01-01T00:00:00Z&end_date=2026-01-02", "start_date"},
		{"?start_date=yesterday&end_date=2026-01-02", "start_date"},
		{"?start_date=2026-01-02&end_date=2026-01-02", "end_date"},
		{"?start_date=2026-01-03&end_date=2026-01-02", "end_date"},
		{"?start_date=2026-01-01&end_date=2026-04-12", "end_date"}, // 101 days
		{"?start_date=0001-01-01&end_date=9999-12-31", "end_date"},
	} {
		st, _, data := e.do("GET", "/v1/dashboard/billing/usage"+tc.query, key, nil)
		msg, typ, code := errBody(t, data)
		if st != http.StatusBadRequest || typ != "invalid_request_error" || code != "invalid_"+tc.field || !strings.Contains(msg, tc.field) {
			t.Errorf("%s: %d %v %q", tc.query, st, code, msg)
		}
	}
}

// TestGenerationOfStreamJustEnded: a client that reads a stream's last
// event and at once asks for its generation gets it, though the settle
// lands a second after that event; a key of another account asking for it
// meanwhile gets 404 without waiting (well within that second, under the
// race detector on a busy CI machine too).
func TestGenerationOfStreamJustEnded(t *testing.T) {
	// Not parallel: it bounds a lookup's latency at 500 ms.
	e0 := newEnv(t)
	e := e0.replica(func(s Store) Store { return slowSettle{s, time.Second} })
	e.account("acme", "5")
	e.account("beta", "5")
	key, other := e.key("acme", "economy"), e.key("beta", "economy")
	req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(chatBody("modelf-flash", "stream", `"stream":true`)))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rid := resp.Header.Get("X-Request-Id")
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "data: [DONE]" {
	}
	start := time.Now()
	if st, _, data := e.do("GET", "/v1/generations/"+rid, other, nil); st != http.StatusNotFound || time.Since(start) > 500*time.Millisecond {
		t.Errorf("another account: %d after %s: %s", st, time.Since(start), data)
	}
	var g holder.GenerationInfo
	holderGet(t, e, key, "/v1/generations/"+rid, &g)
	if x := lastCharge(t, e, "acme"); g.Status != store.OutcomeSettled || x.RequestID != rid || g.ChargeUSD != (-x.Amount).Fixed() {
		t.Errorf("generation %+v, journal %+v", g, x)
	}
}

// timeText is t as the holder's reads show it: RFC 3339, UTC, with as many
// fraction digits as it has.
func timeText(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
