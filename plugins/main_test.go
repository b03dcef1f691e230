package plugins

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The guests the tests load, built once per test process by TestMain with
// the standard toolchain, into a temporary directory.
var (
	firstParty = []string{"tokens", "lines"}
	hostile    = []string{"loop", "hog", "panic", "trap", "garbage", "version", "dup", "settlefail"}

	builtDir  string            // where NAME.wasm files are
	wasmCache string            // the shared compilation cache directory
	guestSrc  map[string]string // NAME → source directory
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "relay-plugins-build-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	builtDir = dir

	wasmCache = os.Getenv(CacheEnv)
	if wasmCache == "" {
		// Not a per-run directory: compiling the guests takes seconds each
		// (much more under -race), and the cache is keyed by module content.
		// It is named after the wazero version, whose compiled code it holds.
		wasmCache = filepath.Join(os.TempDir(), "relay-plugins-test-wasm-cache-"+wazeroVersion())
	}

	guestSrc = make(map[string]string)
	for _, name := range firstParty {
		guestSrc[name] = filepath.Join(".", name)
	}
	for _, name := range hostile {
		guestSrc[name] = filepath.Join("testdata", "hostile", name)
	}
	if err := buildGuests(dir); err != nil {
		fmt.Fprintln(os.Stderr, "building the test plugins:", err)
		return 1
	}
	return m.Run()
}

// wazeroVersion is the wazero module version this binary is built with.
func wazeroVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// buildGuests builds every guest with GOOS=wasip1 GOARCH=wasm
// -buildmode=c-shared, a few at a time. A guest that does not build fails
// the whole run: no test is skipped for want of a plugin.
func buildGuests(out string) error {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range guestSrc {
			if !yield(n) {
				return
			}
		}
	})
	errs := make([]error, len(names))
	sem := make(chan struct{}, max(2, runtime.NumCPU()))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			src := guestSrc[name]
			if _, err := os.Stat(src); err != nil {
				errs[i] = fmt.Errorf("plugin %s: source %s: %w", name, src, err)
				return
			}
			cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", filepath.Join(out, name+".wasm"), "./"+filepath.ToSlash(src))
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("plugin %s: go build %s: %v\n%s", name, src, err, stderr.String())
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// wasmBytes returns the built guest NAME.
func wasmBytes(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(builtDir, name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// configBytes returns the NAME.json that ships beside a first-party plugin's
// source, or nil when there is none.
func configBytes(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(guestSrc[name], name+".json"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stage copies the named guests (and their NAME.json, if any) into dir.
func stage(t testing.TB, dir string, names ...string) {
	t.Helper()
	for _, name := range names {
		writeFile(t, filepath.Join(dir, name+".wasm"), wasmBytes(t, name))
		if cfg := configBytes(t, name); cfg != nil {
			writeFile(t, filepath.Join(dir, name+".json"), cfg)
		}
	}
}

// writeFile writes data to path atomically (a hidden temporary file renamed
// into place), as an operator deploying a plugin should, and moves its
// modification time forward so that a scan within the file system's
// timestamp granularity still sees a change.
func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Duration(writeSeq.Add(1)) * time.Second)
	if err := os.Chtimes(tmp, future, future); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

var writeSeq atomic.Int64

// testLogger collects log records for assertions and, with -v, shows them.
type testLogger struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *testLogger) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(syncWriter{l}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func (l *testLogger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type syncWriter struct{ l *testLogger }

func (w syncWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	return w.l.buf.Write(p)
}

// defaultTestTimeout is the call deadline of tests that do not test
// deadlines.
const defaultTestTimeout = 2 * time.Second

// openDir opens a Host on dir with test defaults: the shared compilation
// cache, no polling and a 2s call deadline unless cfg says otherwise, and a
// collecting logger.
func openDir(t testing.TB, dir string, cfg Config) (*Host, *testLogger) {
	t.Helper()
	logs := &testLogger{}
	cfg.Dir = dir
	if cfg.CacheDir == "" {
		cfg.CacheDir = wasmCache
	}
	if cfg.Poll == 0 {
		cfg.Poll = -1
	}
	if cfg.CallTimeout == 0 {
		// Generous: a loaded 2-core machine running -race can keep a
		// goroutine off the CPU past the 250ms default. Tests of deadlines
		// set their own.
		cfg.CallTimeout = defaultTestTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = logs.logger()
	}
	h, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
		if t.Failed() {
			t.Logf("host log:\n%s", logs.String())
		}
	})
	return h, logs
}

// stats returns the pool figures of one plugin.
func stats(t testing.TB, h *Host, plugin string) PoolStats {
	t.Helper()
	for _, s := range h.Stats() {
		if s.Plugin == plugin {
			return s
		}
	}
	t.Fatalf("no stats for plugin %s in %+v", plugin, h.Stats())
	return PoolStats{}
}

// contains reports whether s contains every part.
func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
