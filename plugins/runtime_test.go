package plugins

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStderrLog(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w := newStderrLog(logger, "p")
	for _, chunk := range []string{"pan", "ic: boom\n", "goroutine 1", " [running]:\n"} {
		if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	logged := out.String()
	if !strings.Contains(logged, `line="panic: boom"`) || !strings.Contains(logged, `line="goroutine 1 [running]:"`) {
		t.Errorf("not logged line by line:\n%s", logged)
	}
	if got := w.last(); got != "panic: boom\ngoroutine 1 [running]:\n" {
		t.Errorf("last() = %q", got)
	}

	t.Run("bounded", func(t *testing.T) {
		out.Reset()
		w := newStderrLog(logger, "p")
		line := strings.Repeat("x", 100) + "\n"
		for range 1000 {
			w.Write([]byte(line))
		}
		if out.Len() > 2*stderrBudget {
			t.Errorf("logged %d bytes for a %d-byte budget", out.Len(), stderrBudget)
		}
		if len(w.last()) != stderrTail {
			t.Errorf("tail holds %d bytes, want %d", len(w.last()), stderrTail)
		}
	})
	t.Run("silent above debug", func(t *testing.T) {
		var quiet bytes.Buffer
		w := newStderrLog(slog.New(slog.NewTextHandler(&quiet, nil)), "p")
		w.Write([]byte("fatal error: out of memory\n"))
		if quiet.Len() != 0 {
			t.Errorf("logged at info level: %s", quiet.String())
		}
		if !strings.Contains(w.last(), "out of memory") {
			t.Errorf("tail lost: %q", w.last())
		}
	})
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Config{Dir: "x"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PoolSize != 2 || cfg.CallTimeout != DefaultCallTimeout || cfg.MemoryLimitPages != 1024 ||
		cfg.RecycleCalls != 1_000_000 || cfg.RecycleBytes != 32<<20 || cfg.Poll != DefaultPoll || cfg.IdleRelease != DefaultIdleRelease || cfg.Logger == nil {
		t.Errorf("defaults = %+v", cfg)
	}
	bad := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"pool size", Config{PoolSize: -1}, "PoolSize"},
		{"call timeout", Config{CallTimeout: -1}, "CallTimeout"},
		{"recycle calls", Config{RecycleCalls: -5}, "RecycleCalls"},
		{"memory limit", Config{MemoryLimitPages: 70000}, "MemoryLimitPages"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.cfg.withDefaults(); err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("err = %v, want one naming %s", err, tc.field)
			}
		})
	}
}

// tinyModule is a valid module with one empty function.
var tinyModule = []byte("\x00asm\x01\x00\x00\x00" +
	"\x01\x04\x01\x60\x00\x00" + // type section: func() -> ()
	"\x03\x02\x01\x00" + // function section: one function of type 0
	"\x0a\x04\x01\x02\x00\x0b") // code section: no locals, end

// meterAndKeep compiles tinyModule on e as a load does and keeps its
// metered copy, returning the copy's checksum.
func meterAndKeep(t *testing.T, e *engine) string {
	t.Helper()
	ctx := context.Background()
	c, metered, err := e.compile(ctx, tinyModule)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close(ctx)
	return e.keepMetered(metered)
}

// engineWithCache is an engine on a cache directory of the test's own,
// logging to the returned logger.
func engineWithCache(t *testing.T) (*engine, string, *testLogger) {
	t.Helper()
	logs := &testLogger{}
	cache := t.TempDir()
	e, err := newEngine(context.Background(), &Config{CacheDir: cache, MemoryLimitPages: DefaultMemoryLimitPages, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.close(context.Background()) })
	return e, cache, logs
}

// The engine keeps what it metered under its checksum, and recompiles
// from it only while the bytes are still those.
func TestRecompileKeptCopy(t *testing.T) {
	ctx := context.Background()
	e, cache, logs := engineWithCache(t)
	sum := meterAndKeep(t, e)
	kept := filepath.Join(cache, "metered", sum+".wasm")
	b, err := os.ReadFile(kept)
	if err != nil || sha256Hex(b) != sum || bytes.Equal(b, tinyModule) {
		t.Fatalf("kept copy: %d bytes, %v (want the metered module, sha256 %s)", len(b), err, sum)
	}
	c, ok, err := e.recompile(ctx, sum)
	if !ok || err != nil {
		t.Fatalf("recompile: %v, %v", ok, err)
	}
	_ = c.Close(ctx)

	if _, ok, err := e.recompile(ctx, strings.Repeat("0", 64)); ok || err != nil {
		t.Errorf("recompile of a sum never kept: %v, %v", ok, err)
	}
	if logs.String() != "" {
		t.Errorf("a missing copy is not worth a warning:\n%s", logs.String())
	}
	writeFile(t, kept, tinyModule)
	if _, ok, err := e.recompile(ctx, sum); ok || err != nil {
		t.Errorf("recompile of a changed copy: %v, %v", ok, err)
	}
	if _, err := os.Stat(kept); !errors.Is(err, fs.ErrNotExist) || !contains(logs.String(), "changed on disk") {
		t.Errorf("a changed copy is removed and reported: %v\n%s", err, logs.String())
	}
	if sum2 := meterAndKeep(t, e); sum2 != sum {
		t.Fatalf("kept again as %s (the meter is deterministic: want %s)", sum2, sum)
	}
	if b, err := os.ReadFile(kept); err != nil || sha256Hex(b) != sum {
		t.Errorf("the copy was not written again: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(cache, "metered")); len(entries) != 1 {
		t.Errorf("metered dir holds %d entries, want the one copy (no temporary files left)", len(entries))
	}

	// Not a regular file (a FIFO would block the read): removed, reported.
	if err := os.Remove(kept); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(kept, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := e.recompile(ctx, sum); ok || err != nil {
		t.Errorf("recompile of a directory: %v, %v", ok, err)
	}
	if _, err := os.Stat(kept); !errors.Is(err, fs.ErrNotExist) || !contains(logs.String(), "not a regular file") {
		t.Errorf("a directory in the copy's place is removed and reported: %v\n%s", err, logs.String())
	}

	// Without a cache directory nothing is kept.
	e2, err := newEngine(ctx, &Config{MemoryLimitPages: DefaultMemoryLimitPages})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.close(ctx)
	if s := meterAndKeep(t, e2); s != sum {
		t.Fatalf("checksum without a cache %q, want %q", s, sum)
	}
	if _, ok, _ := e2.recompile(ctx, sum); ok {
		t.Error("recompile without a cache directory")
	}
}

// pruneMetered removes what no version uses once it is old, the leftovers of
// writes that never finished, and nothing else.
func TestPruneMetered(t *testing.T) {
	e, cache, logs := engineWithCache(t)
	if n := e.pruneMetered(nil, time.Now()); n != 0 {
		t.Fatalf("pruned %d files of a directory not yet made", n)
	}
	inUse := meterAndKeep(t, e)
	dir := filepath.Join(cache, "metered")
	now := time.Now()
	old, recent := now.Add(-meteredMaxAge-time.Minute), now.Add(-meteredMaxAge+time.Minute)
	place := func(name string, mtime time.Time) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return path
	}
	kept := filepath.Join(dir, inUse+".wasm")
	if err := os.Chtimes(kept, old, old); err != nil {
		t.Fatal(err)
	}
	unused := place(strings.Repeat("a", 64)+".wasm", old)
	unusedRecent := place(strings.Repeat("b", 64)+".wasm", recent)
	tmpOld := place(".tmp-123", now.Add(-meteredTmpMaxAge-time.Minute))
	tmpRecent := place(".tmp-456", now.Add(-meteredTmpMaxAge+time.Minute))
	notOurs := []string{
		place("README", old),
		place(strings.Repeat("A", 64)+".wasm", old), // upper case: not a name keepMetered writes
		place(strings.Repeat("c", 63)+".wasm", old),
		place(strings.Repeat("d", 64)+".wasm.bak", old),
	}
	subdir := filepath.Join(dir, strings.Repeat("e", 64)+".wasm")
	if err := os.Mkdir(subdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(subdir, old, old); err != nil {
		t.Fatal(err)
	}

	if n := e.pruneMetered(map[string]bool{inUse: true}, now); n != 2 {
		t.Errorf("pruned %d files, want 2 (the old unused copy, the old temporary file)", n)
	}
	for _, gone := range []string{unused, tmpOld} {
		if _, err := os.Lstat(gone); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: still there (%v)", filepath.Base(gone), err)
		}
	}
	for _, stays := range append([]string{kept, unusedRecent, tmpRecent, subdir}, notOurs...) {
		if _, err := os.Lstat(stays); err != nil {
			t.Errorf("%s: removed (%v)", filepath.Base(stays), err)
		}
	}
	if logs.String() != "" {
		t.Errorf("pruning logged:\n%s", logs.String())
	}

	// Loading the module again marks its copy as used now: once no version
	// uses it, it stays for another meteredMaxAge.
	if sum := meterAndKeep(t, e); sum != inUse {
		t.Fatalf("kept as %s, want %s", sum, inUse)
	}
	if n := e.pruneMetered(nil, time.Now()); n != 0 {
		t.Errorf("pruned %d files right after the copy was used", n)
	}
	if n := e.pruneMetered(nil, time.Now().Add(meteredMaxAge+time.Minute)); n != 3 {
		t.Errorf("a day later: pruned %d files, want 3 (the copy, the other unused copy, the other temporary file)", n)
	}
	if _, err := os.Lstat(kept); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the copy no version uses is still there a day later (%v)", err)
	}
}
