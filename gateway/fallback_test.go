package gateway

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/wire"
)

// settleFailDir is a plugin directory with the line-selection plugin and the
// hostile settlefail plugin (plugins/testdata/hostile/settlefail), built
// here: its settle fails always for modelf-flash and, for modelf-v4-pro, on
// an instance that has served an admit. Both models are priced on route
// standard at $1 per 1M input tokens, $0.50 per 1M cache reads and $4 per
// 1M output tokens.
func settleFailDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	lines, err := os.ReadFile(filepath.Join(pluginDir, "lines.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lines.wasm"), lines, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", filepath.Join(dir, "settlefail.wasm"), "./plugins/testdata/hostile/settlefail")
	cmd.Dir = moduleRoot()
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building settlefail: %v\n%s", err, out)
	}
	return dir
}

// settleFailOwnCharge is what settlefail charges when its settle works.
const settleFailOwnCharge = 4242

// publishedCost is the usage at settlefail's published prices, worked out
// by hand: every price is a whole number of nano-USD per token.
func publishedCost(u pricing.Usage) pricing.Nano {
	return pricing.Nano(u.InputTokens*1000 + u.CacheReadTokens*500 + u.OutputTokens*4000)
}

// A plugin whose settle always fails (and fails again on a fresh instance)
// does not charge the hold: the call is charged the usage at the published
// price, exactly, which for a call without max_tokens is far below the
// hold; the journal says so, an error is logged with the request id and no
// content, and /metrics counts it.
func TestSettleFallbackChargesPublishedPrice(t *testing.T) {
	t.Parallel()
	dir := settleFailDir(t)
	e := newEnv(t, func(c *config.Config) { c.Plugins.Dir = dir })
	e.account("acme", "5")
	key := e.key("acme", "standard")
	canary := fmt.Sprintf("CANARY-%d-okapi", time.Now().UnixNano())
	body := chatBody("modelf-flash", canary+" what does a call cost?")
	st, hdr, data := e.do("POST", "/v1/chat/completions", key, body)
	if st != 200 {
		t.Fatalf("%d %s", st, data)
	}
	rid := hdr.Get("X-Request-Id")
	u, ok, err := wire.ChatUsage(data)
	if err != nil || !ok || u.OutputTokens == 0 {
		t.Fatalf("usage %+v %v %v", u, ok, err)
	}
	want := publishedCost(u)
	// settlefail quotes like a real plugin: the input estimate and the
	// default 4,096 output tokens at the published prices.
	hold := pricing.Nano((holdInputTokens(len(body))*1_000_000_000 + 4096*4_000_000_000 + 999_999) / 1_000_000)
	if want <= 0 || want >= hold {
		t.Fatalf("published cost %d, hold %d: want 0 < cost < hold", want, hold)
	}

	ent := lastCharge(t, e, "acme")
	if ent.Amount != -want || ent.HoldAmount != hold || ent.Usage != u || ent.RequestID != rid {
		t.Errorf("journal entry %+v; want %s charged (hold %s) for usage %+v", ent, want.Fixed(), hold.Fixed(), u)
	}
	if !strings.Contains(ent.Note, "could not price the usage; charged the usage at the published price") {
		t.Errorf("note %q does not say which fallback was used", ent.Note)
	}
	if b := e.balance("acme"); b.Balance != 5*pricing.NanoPerUSD-want || b.Held != 0 {
		t.Errorf("balance %s held %s, want %s charged", b.Balance.Fixed(), b.Held.Fixed(), want.Fixed())
	}

	_, _, metrics := e.do("GET", "/metrics", "", nil)
	if n := metricValue(t, string(metrics), "relay_settle_fallback_total", `plugin="settlefail"`, `reason="plugin_error"`, `fallback="published_price"`); n != 1 {
		t.Errorf("relay_settle_fallback_total = %v, want 1:\n%s", n, grepLines(string(metrics), "relay_settle_fallback"))
	}

	logs := e.logs.String()
	var fallback string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "charged by the fallback") {
			fallback = l
		}
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(fallback), &rec); err != nil {
		t.Fatalf("no fallback log line (%v):\n%s", err, logs)
	}
	if rec["level"] != "ERROR" || rec["request_id"] != rid || rec["plugin"] != "settlefail" || rec["model"] != "modelf-flash" {
		t.Errorf("fallback log line %s: want level ERROR, request id %s, plugin and model", fallback, rid)
	}
	if !strings.Contains(logs, "retrying once on a fresh instance") {
		t.Error("the settle was not retried")
	}
	if strings.Contains(logs, canary) {
		t.Error("the prompt reached the log")
	}
}

// A plugin whose settle fails once, on an instance gone bad, and works on
// the fresh instance of the retry charges its own price: no fallback.
func TestSettleRetrySucceedsWithoutFallback(t *testing.T) {
	t.Parallel()
	dir := settleFailDir(t)
	e := newEnv(t, func(c *config.Config) { c.Plugins.Dir = dir })
	e.account("acme", "5")
	key := e.key("acme", "standard")
	st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-v4-pro", "hello"))
	if st != 200 {
		t.Fatalf("%d %s", st, data)
	}
	ent := lastCharge(t, e, "acme")
	if ent.Amount != -settleFailOwnCharge || ent.Note != "" {
		t.Errorf("journal entry %+v, want the plugin's own charge %d and no note", ent, settleFailOwnCharge)
	}
	if !strings.Contains(e.logs.String(), "retrying once on a fresh instance") {
		t.Error("the first settle did not fail: the test does not test the retry")
	}
	_, _, metrics := e.do("GET", "/metrics", "", nil)
	if n := metricValue(t, string(metrics), "relay_settle_fallback_total"); n != 0 {
		t.Errorf("a fallback was counted:\n%s", grepLines(string(metrics), "relay_settle_fallback"))
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
