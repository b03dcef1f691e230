package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/internal/testwait"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// repriced returns tokens.json with the standard input price of model set to
// price (USD per million tokens).
func repriced(t *testing.T, model, price string) []byte {
	t.Helper()
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(configBytes(t, "tokens")))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("tokens.json: %v", err)
	}
	models, _ := doc["models"].([]any)
	for _, m := range models {
		m, _ := m.(map[string]any)
		if m["id"] != model {
			continue
		}
		routes, _ := m["routes"].(map[string]any)
		std, _ := routes["standard"].(map[string]any)
		if std == nil {
			t.Fatalf("tokens.json: %s has no standard route", model)
		}
		std["input"] = price
		out, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	t.Fatalf("tokens.json: no model %s", model)
	return nil
}

func info(t *testing.T, h *Host, plugin string) PluginInfo {
	t.Helper()
	for _, p := range h.Catalog().Plugins() {
		if p.Name == plugin {
			return p
		}
	}
	t.Fatalf("plugin %s not loaded", plugin)
	return PluginInfo{}
}

func waitDone(t *testing.T, v *version) {
	t.Helper()
	select {
	case <-v.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the retired version of %s never shut down (refs %d)", v.name, v.refs.Load())
	}
}

func TestHotReloadUnderLoad(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "tokens", "lines")
	// The deadline is generous: this test is about the swap, and a loaded
	// 2-core machine can keep a runnable goroutine off the CPU for longer
	// than the 250ms default (TestHostilePlugins covers deadlines).
	h, logs := openDir(t, dir, Config{Poll: 10 * time.Millisecond, CallTimeout: 5 * time.Second})
	ctx := context.Background()
	req := tokensAdmit()
	before, err := h.Admit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	old := h.Catalog().versions["tokens"]
	oldInfo := info(t, h, "tokens")

	load := admitInLoop(h, req, 4)
	testwait.For(t, 10*time.Second, "the load answered at the old price", func() bool { return load.seen(before.Hold) > 0 })
	// Deploy: the same tokens.wasm copied over, with a tokens.json that
	// raises the standard input price.
	writeFile(t, filepath.Join(dir, "tokens.wasm"), wasmBytes(t, "tokens"))
	writeFile(t, filepath.Join(dir, "tokens.json"), repriced(t, req.Model, "97.5"))
	after, err := admitOnceReloaded(t, h, req, oldInfo.Config)
	if err == nil && after.Hold > before.Hold { // the load goes on calling on the new version
		testwait.For(t, 10*time.Second, "the load answered at the new price", func() bool { return load.seen(after.Hold) > 0 })
	}
	holds := load.stop()

	if n := load.failures.Load(); n > 0 {
		t.Fatalf("%d calls failed during the reload; first: %v", n, load.firstErr.Load())
	}
	if err != nil || after.Hold <= before.Hold {
		t.Fatalf("after the reload: hold %d (err %v), want above %d", after.Hold, err, before.Hold)
	}
	if holds[after.Hold] == 0 || holds[before.Hold] == 0 {
		t.Fatalf("holds seen %v: want both the old price (%d) and the new (%d)", holds, before.Hold, after.Hold)
	}
	for hold := range holds {
		if hold != before.Hold && hold != after.Hold {
			t.Fatalf("hold %d is neither the old nor the new price (%v)", hold, holds)
		}
	}
	waitDone(t, old)
	if got := info(t, h, "tokens"); got.SHA256 != oldInfo.SHA256 || !got.Loaded.After(oldInfo.Loaded) {
		t.Errorf("plugin info after the reload: %+v (before %+v)", got, oldInfo)
	}
	if !contains(logs.String(), "plugins reloaded", "replaced=[tokens]") {
		t.Errorf("reload not logged:\n%s", logs.String())
	}
}

// admitLoad is callers making the same Admit call in a loop until stopped.
type admitLoad struct {
	halt     atomic.Bool
	wg       sync.WaitGroup
	failures atomic.Int64
	firstErr atomic.Value // the first error, if any
	mu       sync.Mutex
	holds    map[int64]int // how many calls answered each hold
}

// admitInLoop starts callers goroutines calling h.Admit(req) until stop.
func admitInLoop(h *Host, req abi.AdmitRequest, callers int) *admitLoad {
	l := &admitLoad{holds: map[int64]int{}}
	for range callers {
		l.wg.Go(func() {
			for !l.halt.Load() {
				res, err := h.Admit(context.Background(), req)
				if err != nil {
					l.failures.Add(1)
					l.firstErr.CompareAndSwap(nil, err)
					continue
				}
				l.mu.Lock()
				l.holds[res.Hold]++
				l.mu.Unlock()
			}
		})
	}
	return l
}

// seen is how many calls so far answered hold.
func (l *admitLoad) seen(hold int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holds[hold]
}

// stop stops the callers, waits for them and returns the holds they saw.
func (l *admitLoad) stop() map[int64]int {
	l.halt.Store(true)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holds
}

// admitOnceReloaded waits, up to 30 seconds, for the tokens plugin's config
// to differ from oldConfig, and makes one call on the new version. The
// zero result and a nil error mean the reload never came.
func admitOnceReloaded(t *testing.T, h *Host, req abi.AdmitRequest, oldConfig string) (abi.AdmitResult, error) {
	t.Helper()
	reloaded := time.NewTimer(30 * time.Second)
	defer reloaded.Stop()
	look := time.NewTicker(5 * time.Millisecond)
	defer look.Stop()
	for info(t, h, "tokens").Config == oldConfig {
		select {
		case <-reloaded.C:
			return abi.AdmitResult{}, nil
		case <-look.C:
		}
	}
	return h.Admit(context.Background(), req)
}

func TestReloadBrokenReplacementKeepsServing(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		file    string // replaced file
		data    func(t *testing.T) []byte
		wantErr []string
	}{
		{"not wasm", "tokens.wasm", func(*testing.T) []byte { return []byte("\x00asm garbage") }, []string{"plugin tokens: compile"}},
		{"wrong ABI version", "tokens.wasm", func(t *testing.T) []byte { return wasmBytes(t, "version") }, []string{"plugin tokens", "ABI version 7, host speaks 2"}},
		{"bad configuration", "tokens.json", func(*testing.T) []byte { return []byte(`{"models": [`) }, []string{"plugin tokens", "configuration refused"}},
		{"a plugin that refuses tokens.json", "tokens.wasm", func(t *testing.T) []byte { return wasmBytes(t, "loop") }, []string{"plugin tokens", "configuration refused"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			stage(t, dir, "tokens")
			h, logs := openDir(t, dir, Config{})
			want, err := h.Admit(ctx, tokensAdmit())
			if err != nil {
				t.Fatal(err)
			}
			was := info(t, h, "tokens")
			original, err := os.ReadFile(filepath.Join(dir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, tc.file), tc.data(t))

			err = h.Reload(ctx)
			var pe *Error
			if !errors.As(err, &pe) || pe.Plugin != "tokens" || !contains(err.Error(), tc.wantErr...) {
				t.Fatalf("Reload: %v, want a *plugins.Error naming tokens with %q", err, tc.wantErr)
			}
			if !contains(logs.String(), "previous version keeps serving", "plugin=tokens") {
				t.Errorf("failure not logged:\n%s", logs.String())
			}
			if got, err := h.Admit(ctx, tokensAdmit()); err != nil || got.Hold != want.Hold {
				t.Fatalf("after the broken reload: %+v, %v; want hold %d", got, err, want.Hold)
			}
			if got := info(t, h, "tokens"); got.SHA256 != was.SHA256 || !got.Loaded.Equal(was.Loaded) {
				t.Fatalf("the broken version replaced the good one: %+v", got)
			}
			// The broken files are not retried until they change again.
			if err := h.Reload(ctx); err != nil {
				t.Fatalf("second Reload: %v", err)
			}
			// Fixed: the plugin reloads.
			writeFile(t, filepath.Join(dir, tc.file), original)
			if err := h.Reload(ctx); err != nil {
				t.Fatalf("Reload with the files restored: %v", err)
			}
			if got := info(t, h, "tokens"); !got.Loaded.After(was.Loaded) {
				t.Fatalf("the restored plugin was not reloaded: %+v", got)
			}
			if got, err := h.Admit(ctx, tokensAdmit()); err != nil || got.Hold != want.Hold {
				t.Fatalf("restored: %+v, %v", got, err)
			}
		})
	}
}

func TestReloadAddRemoveTouch(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "panic")
	h, logs := openDir(t, dir, Config{})
	ctx := context.Background()
	oldPanic := h.Catalog().versions["panic"]

	stage(t, dir, "loop")
	if err := h.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.Catalog().PluginFor("loop-model"); got != "loop" {
		t.Fatalf("PluginFor(loop-model) = %q after adding loop.wasm", got)
	}
	if !contains(logs.String(), "added=[loop]") {
		t.Errorf("addition not logged:\n%s", logs.String())
	}
	loaded := info(t, h, "loop").Loaded

	if err := os.Remove(filepath.Join(dir, "panic.wasm")); err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Catalog().Model("panic-model"); ok {
		t.Fatal("panic-model still served after panic.wasm was removed")
	}
	if _, err := h.Admit(ctx, hostileAdmit("panic-model", "")); !errors.Is(err, ErrNoPlugin) {
		t.Fatalf("Admit on a removed plugin: %v", err)
	}
	if !contains(logs.String(), "removed=[panic]") {
		t.Errorf("removal not logged:\n%s", logs.String())
	}
	waitDone(t, oldPanic)

	// A touched file with the same content is not reloaded.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "loop.wasm"), later, later); err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := info(t, h, "loop").Loaded; !got.Equal(loaded) {
		t.Fatalf("touching loop.wasm reloaded it")
	}
	names := []string{}
	for _, p := range h.Catalog().Plugins() {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"loop"}) {
		t.Fatalf("Plugins() = %v", names)
	}

	// Dot files are ignored (a copy in progress).
	writeFile(t, filepath.Join(dir, ".half.wasm"), []byte("partial"))
	if err := h.Reload(ctx); err != nil {
		t.Fatalf("a hidden file was loaded: %v", err)
	}
}

func TestReloadConflict(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "tokens")
	h, logs := openDir(t, dir, Config{})
	ctx := context.Background()

	stage(t, dir, "dup")
	err := h.Reload(ctx)
	if !contains(errString(err), "plugin dup", `"modelb-6-astra"`, "plugin tokens") {
		t.Fatalf("Reload: %v, want the conflict naming dup, tokens and the model", err)
	}
	if got := h.Catalog().PluginFor("modelb-6-astra"); got != "tokens" {
		t.Fatalf("modelb-6-astra served by %q", got)
	}
	if !contains(logs.String(), "plugin refused", "plugin=dup") {
		t.Errorf("refusal not logged:\n%s", logs.String())
	}
	if _, err := h.Admit(ctx, tokensAdmit()); err != nil {
		t.Fatal(err)
	}

	// Once tokens is gone, dup gets its chance.
	for _, f := range []string{"tokens.wasm", "tokens.json"} {
		os.Remove(filepath.Join(dir, f))
	}
	if err := h.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.Catalog().PluginFor("modelb-6-astra"); got != "dup" {
		t.Fatalf("after removing tokens, modelb-6-astra served by %q", got)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestReloadDrainsCallsInFlight(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "loop")
	// The looping call ends at its deadline, which the test waits for: long
	// enough for the reload and the new version's call below on a loaded
	// machine, no longer.
	h, _ := openDir(t, dir, Config{CallTimeout: 15 * time.Second})
	ctx := context.Background()
	old := h.Catalog().versions["loop"]

	// A call that loops until the test cancels it.
	inFlight, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := h.Admit(inFlight, hostileAdmit("loop-model", "loop"))
		done <- err
	}()
	testwait.For(t, 10*time.Second, "the looping call takes the instance", func() bool { return stats(t, h, "loop").Idle == 0 })
	// Replace loop.wasm with another plugin entirely.
	writeFile(t, filepath.Join(dir, "loop.wasm"), wasmBytes(t, "hog"))
	if err := h.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.Catalog().PluginFor("hog-model"); got != "loop" {
		t.Fatalf("hog-model served by %q", got)
	}
	select {
	case <-old.done:
		t.Fatal("the old version shut down with a call in flight")
	default:
	}
	// The new version serves while the old one finishes its call.
	if _, err := h.Admit(ctx, hostileAdmit("hog-model", "")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-old.done:
		t.Fatal("the old version shut down with a call in flight")
	default:
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || !contains(errString(err), "plugin loop", "abandoned by the caller") {
		t.Fatalf("the call in flight: %v", err)
	}
	waitDone(t, old)
	if s := stats(t, h, "loop"); s.Failures != 0 {
		t.Errorf("a call the caller abandoned counted as a failure: %+v", s)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "tokens", "panic")
	ctx := context.Background()
	h, err := LoadFile(ctx, filepath.Join(dir, "tokens.wasm"), Config{CacheDir: wasmCache, Poll: -1, Dir: "/ignored", Logger: (&testLogger{}).logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	plugins := h.Catalog().Plugins()
	if len(plugins) != 1 || plugins[0].Name != "tokens" || plugins[0].Config == "" {
		t.Fatalf("Plugins() = %+v, want tokens alone, configured", plugins)
	}
	if _, err := h.Admit(ctx, tokensAdmit()); err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if len(h.Catalog().Plugins()) != 1 {
		t.Fatal("Reload of a single-file host picked up other files")
	}
	for _, bad := range []string{filepath.Join(dir, "missing.wasm"), filepath.Join(dir, "tokens.json"), dir} {
		if h, err := LoadFile(ctx, bad, Config{Poll: -1}); err == nil {
			h.Close(ctx)
			t.Errorf("LoadFile(%s) succeeded", bad)
		}
	}
}

// Open and every Reload that changes something prune the metered copies no
// loaded plugin uses (engine.pruneMetered); the copies of loaded plugins
// stay however old.
func TestReloadPrunesMeteredCopies(t *testing.T) {
	old := time.Now().Add(-meteredMaxAge - time.Hour)
	age := func(path string) {
		t.Helper()
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(path string) bool {
		_, err := os.Lstat(path)
		return err == nil
	}
	// Open, on the shared cache: a copy of a module no plugin can have (its
	// checksum is not one of bytes a meter wrote) goes, whichever process
	// prunes it.
	stale := filepath.Join(wasmCache, "metered", fmt.Sprintf("%064x.wasm", time.Now().UnixNano()))
	writeFile(t, stale, []byte("an old plugin"))
	age(stale)
	dir := t.TempDir()
	stage(t, dir, "panic")
	h, _ := openDir(t, dir, Config{})
	if exists(stale) {
		t.Error("Open left a copy no plugin uses, unused for over a day")
	}

	// Reload, with the engine's copies moved to a directory of the test's
	// own (the shared cache's compiled code keeps the test fast; pruning
	// the shared copies of loaded plugins would race other tests).
	mine := t.TempDir()
	panicSum := h.Catalog().versions["panic"].meteredCopy()
	b, err := os.ReadFile(filepath.Join(h.opts.engine.meteredDir, panicSum+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	panicCopy := filepath.Join(mine, panicSum+".wasm")
	writeFile(t, panicCopy, b)
	age(panicCopy)
	stale = filepath.Join(mine, strings.Repeat("f", 64)+".wasm")
	writeFile(t, stale, []byte("an old plugin"))
	age(stale)
	h.mu.Lock()
	h.opts.engine.meteredDir = mine
	h.mu.Unlock()

	ctx := context.Background()
	stage(t, dir, "loop")
	if err := h.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(stale) {
		t.Error("a Reload that added a plugin left a copy no plugin uses, unused for over a day")
	}
	if !exists(panicCopy) {
		t.Fatal("a Reload removed the copy of a plugin still loaded")
	}
	if err := os.Remove(filepath.Join(dir, "panic.wasm")); err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(panicCopy) {
		t.Error("the copy of a removed plugin, unused for over a day, outlived the Reload that removed it")
	}
	if loopCopy := filepath.Join(mine, h.Catalog().versions["loop"].meteredCopy()+".wasm"); !exists(loopCopy) {
		t.Error("the loaded plugin's copy was not kept, or was removed")
	}
}
