package plugins

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/internal/testwait"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// tokensAdmit is an ordinary call on the first-party tokens plugin.
func tokensAdmit() abi.AdmitRequest {
	return abi.AdmitRequest{
		Now: 1_790_000_000_000_000_000, Endpoint: "chat_completions", Model: "modelb-6-astra", Route: "standard",
		InputTokens: 1200, MaxOutputTokens: 300, DefaultOutputTokens: 4096,
	}
}

func hostileAdmit(model, mode string) abi.AdmitRequest {
	return abi.AdmitRequest{Endpoint: "chat_completions", Model: model, Route: "standard", InputTokens: 10,
		Params: []abi.Param{{Name: "mode", Value: mode}}}
}

// wantFailure checks that err is a plugin failure naming plugin.
func wantFailure(t *testing.T, err error, plugin string) *Error {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v (%T), want a *plugins.Error", err, err)
	}
	if pe.Plugin != plugin || !strings.HasPrefix(err.Error(), "plugin "+plugin+": ") {
		t.Fatalf("err = %q, want one naming plugin %s", err, plugin)
	}
	var ae *abi.Error
	if errors.As(err, &ae) {
		t.Fatalf("a plugin failure unwraps to a guest error: %v", err)
	}
	return pe
}

func TestHostilePlugins(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "tokens", "lines", "loop", "panic", "trap", "garbage")
	// One instance per plugin, so that "the same instance" and "a fresh
	// instance" are observable.
	h, logs := openDir(t, dir, Config{PoolSize: 1, CallTimeout: 250 * time.Millisecond})

	cases := []hostileCase{
		{name: "infinite loop", plugin: "loop", model: "loop-model", mode: "loop", check: func(t *testing.T, err error, took time.Duration) {
			wantFailure(t, err, "loop")
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want errors.Is DeadlineExceeded", err)
			}
			if took > 5*time.Second {
				t.Errorf("a 250ms deadline took %v to fire", took)
			}
		}},
		{name: "raw trap without the sdk", plugin: "trap", model: "trap-model", mode: "trap", check: func(t *testing.T, err error, _ time.Duration) {
			wantFailure(t, err, "trap")
			if !strings.Contains(err.Error(), "wasm error") && !strings.Contains(err.Error(), "exit_code") {
				t.Errorf("err = %v, want the trap", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the error carries the wasm stack trace: %q", err)
			}
		}},
	}
	for _, mode := range []string{"status", "empty", "outside", "huge", "trailing", "negative", "truncated"} {
		cases = append(cases, hostileCase{name: "garbage envelope " + mode, plugin: "garbage", model: "garbage-model", mode: mode,
			check: func(t *testing.T, err error, _ time.Duration) {
				wantFailure(t, err, "garbage")
				if !errors.Is(err, ErrMalformed) {
					t.Errorf("err = %v, want ErrMalformed", err)
				}
			}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkHostileCall(t, h, logs, tc) })
	}
	t.Run("panic recovered by the sdk", func(t *testing.T) { checkPanicRecovered(t, h) })
	t.Run("no plugin for the model", func(t *testing.T) {
		_, err := h.Admit(context.Background(), hostileAdmit("no-such-model", ""))
		var pe *Error
		if !errors.As(err, &pe) || !errors.Is(err, ErrNoPlugin) || !strings.Contains(err.Error(), `"no-such-model"`) {
			t.Fatalf("err = %v", err)
		}
		if _, err := h.Settle(context.Background(), abi.SettleRequest{Model: "no-such-model"}); !errors.Is(err, ErrNoPlugin) {
			t.Fatalf("settle err = %v", err)
		}
	})
}

// hostileCase is a call that makes plugin misbehave (the hostile plugin's
// mode) and what its error must be.
type hostileCase struct {
	name   string
	plugin string
	model  string
	mode   string
	check  func(t *testing.T, err error, took time.Duration)
}

// checkHostileCall makes tc's call and checks its error, then wants the
// failure logged with the plugin's name and counted once, the same plugin
// to answer the next normal call on a fresh instance (the pool holds one),
// and other plugins to keep serving.
func checkHostileCall(t *testing.T, h *Host, logs *testLogger, tc hostileCase) {
	t.Helper()
	ctx := context.Background()
	before := stats(t, h, tc.plugin)
	start := time.Now()
	_, err := h.Admit(ctx, hostileAdmit(tc.model, tc.mode))
	tc.check(t, err, time.Since(start))
	if !strings.Contains(logs.String(), "plugin="+tc.plugin) {
		t.Errorf("the failure was not logged with the plugin name")
	}
	after := stats(t, h, tc.plugin)
	if after.Failures != before.Failures+1 {
		t.Errorf("failures %d → %d, want one more", before.Failures, after.Failures)
	}
	res, err := h.Admit(ctx, hostileAdmit(tc.model, ""))
	if err != nil || res.Hold != 1 {
		t.Fatalf("next normal call: %+v, %v", res, err)
	}
	if s := stats(t, h, tc.plugin); s.Instances != 1 {
		t.Errorf("instances = %d, want 1", s.Instances)
	}
	if _, err := h.Admit(ctx, tokensAdmit()); err != nil {
		t.Fatalf("tokens after the failure: %v", err)
	}
}

// checkPanicRecovered wants a panic the sdk recovers to come back as the
// guest's internal error, not a plugin failure, and the instance to survive
// it: its call counter goes on.
func checkPanicRecovered(t *testing.T, h *Host) {
	t.Helper()
	ctx := context.Background()
	first, err := h.Admit(ctx, hostileAdmit("panic-model", ""))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Admit(ctx, hostileAdmit("panic-model", "panic"))
	var ae *abi.Error
	if !errors.As(err, &ae) || ae.Code != abi.CodeInternal || !strings.Contains(ae.Message, "panic") || !strings.Contains(ae.Message, "boom") {
		t.Fatalf("err = %v, want the guest's internal error about its panic", err)
	}
	var pe *Error
	if errors.As(err, &pe) {
		t.Fatalf("a recovered panic is a plugin failure: %v", err)
	}
	next, err := h.Admit(ctx, hostileAdmit("panic-model", ""))
	if err != nil || next.Hold != first.Hold+1 {
		t.Fatalf("after the panic: %+v, %v; want hold %d from the same instance", next, err, first.Hold+1)
	}
	if s := stats(t, h, "panic"); s.Failures != 0 {
		t.Errorf("failures = %d, want 0", s.Failures)
	}
}

// TestLoopingGuestLetsGCRun: a guest in an endless loop must not stop the
// gateway. Compiled wasm cannot be preempted by the Go scheduler, so a
// garbage collection waits for the goroutine running the guest to come back
// into Go; the meter's calls into the host are those returns. Without them
// runtime.GC would wait for the whole call (its deadline, 3s here) and the
// call would end first.
func TestLoopingGuestLetsGCRun(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "loop")
	h, _ := openDir(t, dir, Config{PoolSize: 1, CallTimeout: 3 * time.Second})
	done := make(chan error, 1)
	go func() {
		_, err := h.Admit(context.Background(), hostileAdmit("loop-model", "loop"))
		done <- err
	}()
	// The instance is taken: the call is on its way in.
	testwait.For(t, 10*time.Second, "the looping call takes the instance", func() bool { return stats(t, h, "loop").Idle == 0 })
	// Nothing outside the guest marks its entry into the loop, so this
	// pause is the test's window for it to get there (a collection that
	// came first would pass without testing anything).
	time.Sleep(50 * time.Millisecond)
	runtime.GC()
	select {
	case err := <-done:
		t.Fatalf("the call ended (%v) before the garbage collection", err)
	default:
	}
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
}

func TestOutOfMemory(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "hog")
	// A long deadline, so that the memory ceiling (24 MiB) is what stops
	// the guest.
	h, _ := openDir(t, dir, Config{PoolSize: 1, MemoryLimitPages: 384, CallTimeout: 20 * time.Second})
	ctx := context.Background()
	_, err := h.Admit(ctx, hostileAdmit("hog-model", "hog"))
	wantFailure(t, err, "hog")
	if !errors.Is(err, ErrMemoryLimit) {
		t.Fatalf("err = %v, want ErrMemoryLimit", err)
	}
	if res, err := h.Admit(ctx, hostileAdmit("hog-model", "")); err != nil || res.Hold != 1 {
		t.Fatalf("next call: %+v, %v", res, err)
	}
}

func TestLoadRefused(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  []string // parts of the error
		who   string   // the plugin the *Error names; "" = not an *Error
	}{
		{name: "wrong ABI version", setup: func(t *testing.T, dir string) { stage(t, dir, "tokens", "version") },
			want: []string{"plugin version: ", "ABI version 7, host speaks 2"}, who: "version"},
		{name: "model already claimed", setup: func(t *testing.T, dir string) { stage(t, dir, "tokens", "dup") },
			// Both are new at Open: the one added second (by name) is blamed.
			want: []string{"plugin tokens: load: ", `model "modelb-6-astra" is already served by plugin dup`}, who: "tokens"},
		{name: "two select plugins", setup: func(t *testing.T, dir string) {
			stage(t, dir, "lines")
			writeFile(t, filepath.Join(dir, "lines2.wasm"), wasmBytes(t, "lines"))
			if cfg := configBytes(t, "lines"); cfg != nil {
				writeFile(t, filepath.Join(dir, "lines2.json"), cfg)
			}
		}, want: []string{"plugin lines2", "plugin lines already implements select"}, who: "lines2"},
		{name: "not wasm", setup: func(t *testing.T, dir string) {
			stage(t, dir, "tokens")
			writeFile(t, filepath.Join(dir, "junk.wasm"), []byte("#!/bin/sh\necho hi\n"))
		}, want: []string{"plugin junk: compile"}, who: "junk"},
		{name: "a 15-byte module declaring 2³¹ types", setup: func(t *testing.T, dir string) {
			// wazero's decoder would allocate them all (tens of GB) and the
			// process would die; the meter reads lengths before it does.
			writeFile(t, filepath.Join(dir, "huge.wasm"), []byte("\x00asm\x01\x00\x00\x00\x01\x05\x80\x80\x80\x80\x08"))
		}, want: []string{"plugin huge: compile: wasmmeter: section 1", "vector of 2147483648 elements"}, who: "huge"},
		{name: "hand-written module answering nothing", setup: func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "mute.wasm"), wasmModule([]wasmFunc{goodVersion, goodAlloc, goodCall}, true))
		}, want: []string{"plugin mute: instantiate: configure: malformed result"}, who: "mute"},
		{name: "configuration refused", setup: func(t *testing.T, dir string) {
			stage(t, dir, "trap") // takes no NAME.json …
			writeFile(t, filepath.Join(dir, "panic.wasm"), wasmBytes(t, "panic"))
			writeFile(t, filepath.Join(dir, "panic.json"), []byte(`{"unexpected": true}`)) // … nor does panic
		}, want: []string{"plugin panic: instantiate: configure: configuration refused"}, who: "panic"},
		{name: "empty directory", setup: func(t *testing.T, dir string) {}, want: []string{"no plugins"}},
		{name: "missing directory", setup: func(t *testing.T, dir string) { os.Remove(dir) }, want: []string{"plugin directory"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "plugins")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, dir)
			h, err := Open(context.Background(), Config{Dir: dir, CacheDir: wasmCache, Poll: -1, Logger: (&testLogger{}).logger()})
			if err == nil {
				h.Close(context.Background())
				t.Fatal("Open succeeded")
			}
			if !contains(err.Error(), tc.want...) {
				t.Fatalf("err = %q, want it to contain %q", err, tc.want)
			}
			var pe *Error
			if tc.who != "" && (!errors.As(err, &pe) || pe.Plugin != tc.who) {
				t.Fatalf("err = %v, want a *plugins.Error naming %s", err, tc.who)
			}
		})
	}
}

func TestPoolBounded(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "loop")
	h, _ := openDir(t, dir, Config{PoolSize: 2, CallTimeout: time.Second})
	ctx := context.Background()

	t.Run("never more instances than PoolSize", func(t *testing.T) {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var maxSeen int
		var mu sync.Mutex
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := stats(t, h, "loop").Instances
				mu.Lock()
				maxSeen = max(maxSeen, n)
				mu.Unlock()
				time.Sleep(100 * time.Microsecond)
			}
		})
		var callers sync.WaitGroup
		errs := make(chan error, 8*50)
		for range 8 {
			callers.Go(func() {
				for range 50 {
					if _, err := h.Admit(ctx, hostileAdmit("loop-model", "")); err != nil {
						errs <- err
					}
				}
			})
		}
		callers.Wait()
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("call failed: %v", err)
		}
		if maxSeen > 2 {
			t.Fatalf("saw %d instances, PoolSize is 2", maxSeen)
		}
	})

	t.Run("a caller waits on its own context", func(t *testing.T) {
		// Occupy both instances with looping calls (1s deadline).
		var wg sync.WaitGroup
		calls := stats(t, h, "loop").Calls
		for range 2 {
			wg.Go(func() { h.Admit(ctx, hostileAdmit("loop-model", "loop")) })
		}
		testwait.For(t, 10*time.Second, "both looping calls hold an instance", func() bool {
			s := stats(t, h, "loop")
			return s.Calls == calls+2 && s.Instances == 2 && s.Idle == 0
		})
		before := stats(t, h, "loop").Failures
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := h.Admit(short, hostileAdmit("loop-model", ""))
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 500*time.Millisecond {
			t.Fatalf("err = %v after %v, want the caller's deadline", err, time.Since(start))
		}
		wantFailure(t, err, "loop")
		wg.Wait()
		// The two looping calls failed; the caller that gave up did not
		// count against the plugin.
		if got := stats(t, h, "loop").Failures; got != before+2 {
			t.Errorf("failures %d → %d, want +2", before, got)
		}
		if _, err := h.Admit(ctx, hostileAdmit("loop-model", "")); err != nil {
			t.Fatalf("after: %v", err)
		}
	})
}

func TestPoolGrowsForCallersThatGaveUp(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "loop")
	h, _ := openDir(t, dir, Config{PoolSize: 2, CallTimeout: 3 * time.Second})
	ctx := context.Background()

	// Occupy the one instance with a call that loops until the call
	// timeout stops it (a guest call runs under the host's deadline, not
	// the caller's cancellation: see guard.go).
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Admit(ctx, hostileAdmit("loop-model", "loop"))
	}()
	defer func() { <-done }()
	testwait.For(t, 10*time.Second, "the looping call takes the instance", func() bool { return stats(t, h, "loop").Idle == 0 })

	// This caller starts a second instance and gives up long before it is
	// ready; the instance still joins the pool.
	short, stop := context.WithTimeout(ctx, time.Millisecond)
	defer stop()
	if _, err := h.Admit(short, hostileAdmit("loop-model", "")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
	testwait.For(t, 20*time.Second, "the second instance idle in the pool", func() bool {
		s := stats(t, h, "loop")
		return s.Instances == 2 && s.Idle == 1
	})
	if s := stats(t, h, "loop"); s.Failures != 0 {
		t.Errorf("failures = %d", s.Failures)
	}
	if _, err := h.Admit(ctx, hostileAdmit("loop-model", "")); err != nil {
		t.Fatal(err)
	}
}

func TestRecycle(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "panic")
	ctx := context.Background()
	cases := []struct {
		name string
		cfg  Config
	}{
		{"after calls", Config{PoolSize: 1, RecycleCalls: 3}},
		{"above memory", Config{PoolSize: 1, RecycleBytes: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := openDir(t, dir, tc.cfg)
			maxHold := int64(0)
			for range 10 {
				res, err := h.Admit(ctx, hostileAdmit("panic-model", ""))
				if err != nil {
					t.Fatal(err)
				}
				maxHold = max(maxHold, res.Hold)
			}
			s := stats(t, h, "panic")
			if s.Recycled < 3 || s.Failures != 0 || s.Instances != 1 {
				t.Fatalf("stats = %+v, want ≥3 recycled, no failures, 1 instance", s)
			}
			// The panic guest's hold counts the calls its instance served.
			if limit := int64(max(tc.cfg.RecycleCalls, 1)); maxHold > limit {
				t.Fatalf("an instance served %d calls, recycling limit is %d", maxHold, limit)
			}
		})
	}
}

func TestClose(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "loop")
	h, err := Open(context.Background(), Config{Dir: dir, CacheDir: wasmCache, Poll: 10 * time.Millisecond,
		CallTimeout: 300 * time.Millisecond, Logger: (&testLogger{}).logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A call in flight when Close starts finishes (here: at its deadline).
	done := make(chan error, 1)
	go func() {
		_, err := h.Admit(ctx, hostileAdmit("loop-model", "loop"))
		done <- err
	}()
	testwait.For(t, 10*time.Second, "the looping call takes the instance", func() bool { return stats(t, h, "loop").Idle == 0 })
	start := time.Now()
	if err := h.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Fatalf("Close returned after %v, before the call in flight ended", took)
	}
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("in-flight call: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call in flight never returned")
	}
	if _, err := h.Admit(ctx, hostileAdmit("loop-model", "")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Admit after Close: %v", err)
	}
	if _, err := h.Select(ctx, abi.SelectRequest{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Select after Close: %v", err)
	}
	if err := h.Reload(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reload after Close: %v", err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
