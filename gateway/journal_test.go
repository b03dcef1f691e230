package gateway

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/gateway/admin"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/store"
)

// What the journal records of a call: the estimates of a call settled
// without usage, and the entries as the admin API shows them.

// A chat stream whose client did not ask for usage (so the gateway added
// stream_options to the body it forwarded) and that is cut is settled from
// the estimate of the caller's body, not the forwarded one: input tokens =
// ceil(len(caller body)/4), output tokens = ceil(text delivered/4).
func TestCutStreamEstimateCountsCallerBody(t *testing.T) {
	t.Parallel()
	cp := &capture{sim: sim.New(sim.Options{CutAfter: 3, Chunks: 8})}
	up := httptest.NewServer(cp)
	defer up.Close()
	e := newEnv(t, func(c *config.Config) { c.Lines[2].BaseURL = up.URL }) // eco-a
	e.account("acme", "5")
	key := e.key("acme", "economy")
	body := chatBody("modelf-flash", "estimate me from my own bytes", `"stream":true`)
	req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	text := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		for _, c := range ch.Choices {
			text += len(c.Delta.Content) + len(c.Delta.ReasoningContent)
		}
	}
	resp.Body.Close()
	if sc.Err() == nil {
		t.Fatal("the stream was not cut")
	}
	_, fwd := cp.last()
	ceil4 := func(n int) int64 { return int64((n + 3) / 4) }
	if !strings.Contains(string(fwd), "include_usage") || ceil4(len(fwd)) == ceil4(len(body)) {
		t.Fatalf("forwarded %d bytes for a caller body of %d: the test needs the gateway's include_usage to change the estimate", len(fwd), len(body))
	}
	if text == 0 {
		t.Fatal("no text delivered before the cut")
	}
	want := pricing.Usage{InputTokens: ceil4(len(body)), OutputTokens: ceil4(text)}
	ent := lastCharge(t, e, "acme")
	if ent.Usage != want {
		t.Errorf("estimated usage %+v, want %+v (caller body %d bytes, forwarded %d, text %d)", ent.Usage, want, len(body), len(fwd), text)
	}
	if price := expectedCharge(t, e, "modelf-flash", "economy", want); ent.Amount != -price || !strings.Contains(ent.Note, "estimated") {
		t.Errorf("entry %+v, want %s charged for the estimate", ent, price.Fixed())
	}
}

// A JSON answer without usage is settled from the same estimate: the
// caller's body and the answer's bytes, one token per four, rounded up.
func TestJSONEstimateCountsCallerBody(t *testing.T) {
	t.Parallel()
	const answer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"modelf-flash","choices":[{"index":0,"message":{"role":"assistant","content":"no usage here"},"finish_reason":"stop"}]}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answer))
	}))
	defer up.Close()
	e := newEnv(t, func(c *config.Config) { c.Lines[2].BaseURL = up.URL }) // eco-a
	e.account("acme", "5")
	key := e.key("acme", "economy")
	body := chatBody("modelf-flash", "what if the provider forgets the usage?")
	if st, _, data := e.do("POST", "/v1/chat/completions", key, body); st != 200 || string(data) != answer {
		t.Fatalf("%d %s", st, data)
	}
	want := pricing.Usage{InputTokens: int64((len(body) + 3) / 4), OutputTokens: int64((len(answer) + 3) / 4)}
	ent := lastCharge(t, e, "acme")
	if ent.Kind != store.KindCharge || ent.Usage != want || !strings.Contains(ent.Note, "carried no usage") {
		t.Errorf("entry %+v, want the estimate %+v", ent, want)
	}
}

// GET /admin/accounts/{id}/charges shows usage with snake_case fields, zero
// fields left out, and the admin CLI's decoding reads the same numbers back.
func TestAdminChargesUsageSnakeCase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "economy")
	if st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "snake or camel?")); st != 200 {
		t.Fatalf("%d %s", st, data)
	}
	stored := lastCharge(t, e, "acme")
	st, _, data := e.do("GET", "/admin/accounts/acme/charges", testAdminToken, nil)
	if st != 200 {
		t.Fatalf("%d %s", st, data)
	}
	var raw struct {
		Data []struct {
			Kind  string         `json:"kind"`
			Usage map[string]any `json:"usage"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &raw); err != nil || len(raw.Data) != 2 {
		t.Fatalf("%v: %s", err, data)
	}
	charge, credit := raw.Data[0], raw.Data[1]
	want := map[string]any{"input_tokens": float64(stored.Usage.InputTokens), "output_tokens": float64(stored.Usage.OutputTokens)}
	if stored.Usage.CacheReadTokens > 0 {
		want["cache_read_tokens"] = float64(stored.Usage.CacheReadTokens)
	}
	if charge.Kind != store.KindCharge || !reflect.DeepEqual(charge.Usage, want) {
		t.Errorf("the charge's usage is %v, want %v", charge.Usage, want)
	}
	if credit.Kind != store.KindCredit || len(credit.Usage) != 0 {
		t.Errorf("the credit's usage is %v, want {}", credit.Usage)
	}
	if strings.Contains(string(data), "InputTokens") || strings.Contains(string(data), "OutputTokens") {
		t.Errorf("Go field names in the API: %s", data)
	}
	var views struct {
		Data []admin.EntryView `json:"data"`
	}
	if err := json.Unmarshal(data, &views); err != nil || views.Data[0].Usage != stored.Usage {
		t.Errorf("read back %+v (%v), want %+v", views.Data[0].Usage, err, stored.Usage)
	}
}
