package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/fixture"
)

func TestFirstPartyCatalog(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "tokens", "lines")
	h, _ := openDir(t, dir, Config{})
	c := h.Catalog()

	// Every text model (docs/api.md#models) is served by tokens.
	for _, id := range []string{"modela-fable-5-1", "modela-sonnet-5-5", "modela-opus-5-5", "modelb-6-astra", "modelb-6.1-sol",
		"modelc-4.7", "modeld-5.3-Abliterated", "modele-k3", "modelf-flash", "modelf-v4-pro"} {
		m, ok := c.Model(id)
		if !ok || c.PluginFor(id) != "tokens" {
			t.Errorf("model %s: served %v by %q", id, ok, c.PluginFor(id))
			continue
		}
		if _, ok := m.Routes[m.AutoRoute]; !ok || m.Routes["standard"].Unit != pricing.PerMillionTokens {
			t.Errorf("model %s: auto route %q, routes %v", id, m.AutoRoute, m.Routes)
		}
	}
	models := c.Models()
	for i := 1; i < len(models); i++ {
		if models[i-1].ID >= models[i].ID {
			t.Fatalf("Models() not sorted: %s before %s", models[i-1].ID, models[i].ID)
		}
	}
	infos := c.Plugins()
	if len(infos) != 2 || infos[0].Name != "lines" || infos[1].Name != "tokens" || len(infos[0].Models) != 0 ||
		len(infos[1].SHA256) != 64 || infos[1].Config == "" || infos[1].Loaded.IsZero() {
		t.Fatalf("Plugins() = %+v", infos)
	}
	if c.selector == nil || c.selector.name != "lines" {
		t.Fatalf("selector = %v", c.selector)
	}
}

func TestAdmitSettle(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "tokens")
	h, _ := openDir(t, dir, Config{})
	ctx := context.Background()

	req := tokensAdmit()
	res, err := h.Admit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// The hold prices the estimated input and the whole output budget at
	// the route's prices; the model's price list is in the catalogue.
	m, _ := h.Catalog().Model(req.Model)
	p := m.Routes[req.Route]
	worst, err := p.Charge(pricing.Usage{InputTokens: req.InputTokens, OutputTokens: req.MaxOutputTokens})
	if err != nil {
		t.Fatal(err)
	}
	if res.Hold < int64(worst) {
		t.Errorf("hold %d is below the price of the worst case %d", res.Hold, worst)
	}
	usage := abi.Usage{InputTokens: 900, OutputTokens: 120}
	set, err := h.Settle(ctx, abi.SettleRequest{Now: req.Now, Endpoint: req.Endpoint, Model: req.Model, Route: req.Route, Usage: usage})
	if err != nil {
		t.Fatal(err)
	}
	want, err := p.Charge(pricing.Usage{InputTokens: 900, OutputTokens: 120})
	if err != nil {
		t.Fatal(err)
	}
	if set.Charge != int64(want) {
		t.Errorf("charge = %d, want %d (pricing.Price.Charge)", set.Charge, want)
	}

	t.Run("guest errors are returned unchanged", func(t *testing.T) {
		bad := req
		bad.MaxOutputTokens = -1
		_, err := h.Admit(ctx, bad)
		var ae *abi.Error
		if !errors.As(err, &ae) || ae.Code != abi.CodeInvalid || ae.Field == "" {
			t.Fatalf("err = %#v, want the guest's invalid_request naming a field", err)
		}
		var pe *Error
		if errors.As(err, &pe) {
			t.Fatal("a guest error became a plugin failure")
		}
		if s := stats(t, h, "tokens"); s.Failures != 0 {
			t.Errorf("failures = %d", s.Failures)
		}
	})

	t.Run("concurrent calls", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for range 8 {
			wg.Go(func() {
				for range 25 {
					got, err := h.Admit(ctx, req)
					if err == nil && got.Hold != res.Hold {
						err = errors.New("hold " + strconv.FormatInt(got.Hold, 10) + ", want " + strconv.FormatInt(res.Hold, 10))
					}
					if err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if s := stats(t, h, "tokens"); s.Instances > 2 {
			t.Fatalf("instances = %d, PoolSize is 2", s.Instances)
		}
	})
}

func selectReq() abi.SelectRequest {
	return abi.SelectRequest{Now: 1, Model: "modelc-4.7", Route: "economy", Lines: []abi.Line{
		{Name: "eco-1", Route: "economy", Models: []string{"modelc-4.7"}, Priority: 0, Weight: 3},
		{Name: "eco-2", Route: "economy", Models: []string{"modelc-4.7"}, Priority: 0, Weight: 1},
		{Name: "spill", Route: "economy", Models: []string{"modelc-4.7"}, Priority: 1, Weight: 1},
		{Name: "std", Route: "standard", Models: []string{"modelc-4.7"}, Priority: 0, Weight: 1},
	}}
}

func planLines(plan []abi.Step) string {
	var b strings.Builder
	for i, s := range plan {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s.Line + "/" + strconv.FormatInt(s.Tier, 10))
	}
	return b.String()
}

func TestSelect(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "tokens", "lines")
	h, _ := openDir(t, dir, Config{})
	ctx := context.Background()
	calls := func() uint64 { return stats(t, h, "lines").Calls }

	req := selectReq()
	res, err := h.Select(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := planLines(res.Plan); got != "eco-1/0 eco-2/0 spill/1" {
		t.Fatalf("plan = %s", got)
	}
	n := calls()

	// Same model, route and lines at another time: cached.
	later := selectReq()
	later.Now = 999
	res.Plan[0].Line = "reordered by the caller"
	again, err := h.Select(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	if calls() != n {
		t.Errorf("an identical select called the plugin again")
	}
	if got := planLines(again.Plan); got != "eco-1/0 eco-2/0 spill/1" {
		t.Fatalf("cached plan = %s (the caller's change leaked into the cache?)", got)
	}

	// A breaker opens: a new key, a new plan.
	open := selectReq()
	open.Lines[0].Open = true
	res, err = h.Select(ctx, open)
	if err != nil {
		t.Fatal(err)
	}
	if got := planLines(res.Plan); got != "eco-2/0 spill/1" || calls() != n+1 {
		t.Fatalf("plan with eco-1 open = %s (calls %d → %d)", got, n, calls())
	}

	// A guest error is returned as is and not cached.
	bad := selectReq()
	bad.Lines[1].Weight = -1
	for range 2 {
		_, err = h.Select(ctx, bad)
		var ae *abi.Error
		if !errors.As(err, &ae) {
			t.Fatalf("err = %v, want the guest's error", err)
		}
	}
	if calls() != n+3 {
		t.Errorf("calls = %d, want %d: an error was cached", calls(), n+3)
	}

	t.Run("no select plugin", func(t *testing.T) {
		dir := t.TempDir()
		stage(t, dir, "tokens")
		h, _ := openDir(t, dir, Config{})
		_, err := h.Select(ctx, selectReq())
		var pe *Error
		if !errors.As(err, &pe) || !errors.Is(err, ErrNoPlugin) || pe.Op != "select" {
			t.Fatalf("err = %v", err)
		}
	})
}

// fixtureDir is where the first-party fixtures live.
func fixtureDir(plugin string) string { return filepath.Join("..", "testdata", "plugins", plugin) }

func TestFixtureRunner(t *testing.T) {
	t.Setenv(CacheEnv, wasmCache)
	ctx := context.Background()
	dir := t.TempDir()
	stage(t, dir, "tokens", "lines")

	for _, plugin := range []string{"tokens", "lines"} {
		t.Run(plugin, func(t *testing.T) { checkFixturesPass(t, filepath.Join(dir, plugin+".wasm"), fixtureDir(plugin)) })
	}
	t.Run("wrong expectation fails, -update fixes it", func(t *testing.T) {
		checkUpdateFixesCharge(t, filepath.Join(dir, "tokens.wasm"))
	})
	t.Run("setup errors", func(t *testing.T) {
		var out bytes.Buffer
		if _, _, err := TestFixtures(ctx, filepath.Join(dir, "missing.wasm"), fixtureDir("tokens"), false, &out); err == nil {
			t.Error("a missing plugin is not an error")
		}
		if _, _, err := TestFixtures(ctx, filepath.Join(dir, "tokens.wasm"), t.TempDir(), false, &out); err == nil {
			t.Error("an empty fixture directory is not an error")
		}
	})
}

// checkFixturesPass wants every fixture in fdir to pass on the plugin, and
// the runner to print an "ok" line per fixture, in order, and the count.
func checkFixturesPass(t *testing.T, wasm, fdir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(fdir, "*.json"))
	if len(files) == 0 {
		t.Fatalf("no fixtures in %s", fdir)
	}
	var out bytes.Buffer
	passed, failed, err := TestFixtures(context.Background(), wasm, fdir, false, &out)
	if err != nil || failed != 0 || passed != len(files) {
		t.Fatalf("passed %d, failed %d, err %v; want %d passed\n%s", passed, failed, err, len(files), out.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(files)+1 || lines[len(lines)-1] != strconv.Itoa(len(files))+" passed, 0 failed" {
		t.Fatalf("output:\n%s", out.String())
	}
	for i, f := range files {
		if want := "ok   " + strings.TrimSuffix(filepath.Base(f), ".json"); lines[i] != want {
			t.Errorf("line %d = %q, want %q", i, lines[i], want)
		}
	}
}

// checkUpdateFixesCharge runs the tokens plugin on two failing fixtures: a
// copy of chat-plain.json expecting a wrong charge, and a fixture on which
// the plugin fails (no plugin serves its model). Both fail, the wrong one
// naming both charges; -update rewrites the charge and leaves the other
// fixture alone.
func checkUpdateFixesCharge(t *testing.T, wasm string) {
	t.Helper()
	ctx := context.Background()
	fdir := t.TempDir()
	right, wrong, ghost := writeWrongFixtures(t, fdir)
	ghostBytes, _ := os.ReadFile(ghost)

	var out bytes.Buffer
	passed, failed, err := TestFixtures(ctx, wasm, fdir, false, &out)
	if err != nil || passed != 0 || failed != 2 {
		t.Fatalf("passed %d, failed %d, err %v\n%s", passed, failed, err, out.String())
	}
	wantLine := "FAIL chat-plain: settle: charge = " + strconv.FormatInt(right, 10) + ", want " + strconv.FormatInt(wrong, 10)
	if !strings.Contains(out.String(), wantLine+"\n") || !strings.Contains(out.String(), "FAIL ghost: ") ||
		!strings.HasSuffix(out.String(), "\n0 passed, 2 failed\n") {
		t.Fatalf("output:\n%s\nwant a line %q", out.String(), wantLine)
	}

	out.Reset()
	passed, failed, err = TestFixtures(ctx, wasm, fdir, true, &out)
	if err != nil || passed != 1 || failed != 1 || !strings.Contains(out.String(), "ok   chat-plain\n") {
		t.Fatalf("-update: passed %d, failed %d, err %v\n%s", passed, failed, err, out.String())
	}
	fixed, err := os.ReadFile(filepath.Join(fdir, "chat-plain.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Expect struct {
			Charge json.Number `json:"charge"`
		} `json:"expect"`
	}
	if err := json.Unmarshal(fixed, &doc); err != nil || doc.Expect.Charge.String() != strconv.FormatInt(right, 10) {
		t.Fatalf("rewritten expect.charge = %s (%v), want %d", doc.Expect.Charge, err, right)
	}
	if now, _ := os.ReadFile(ghost); !bytes.Equal(now, ghostBytes) {
		t.Fatalf("-update rewrote a fixture the plugin failed on:\n%s", now)
	}
}

// writeWrongFixtures writes to fdir chat-plain.json, the tokens fixture of
// that name expecting its charge plus 7, and ghost.json, the same call to a
// model no plugin serves. It returns the right and the wrong charge and
// ghost.json's path.
func writeWrongFixtures(t *testing.T, fdir string) (right, wrong int64, ghostPath string) {
	t.Helper()
	orig, err := os.ReadFile(filepath.Join(fixtureDir("tokens"), "chat-plain.json"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := fixture.Parse(orig)
	if err != nil {
		t.Fatal(err)
	}
	if f.Expect.Charge == nil {
		t.Fatal("chat-plain.json expects no charge")
	}
	right = *f.Expect.Charge
	wrong = right + 7
	f.Expect.Charge = &wrong
	f.Path = filepath.Join(fdir, "chat-plain.json")
	if err := f.Save(); err != nil {
		t.Fatal(err)
	}
	ghost := f
	ghost.Model = "no-such-model"
	ghost.Path = filepath.Join(fdir, "ghost.json")
	if err := ghost.Save(); err != nil {
		t.Fatal(err)
	}
	return right, wrong, ghost.Path
}
