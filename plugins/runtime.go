package plugins

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/modelrelay/modelrelay/internal/wasmmeter"
)

// # Sandbox
//
// A plugin gets what the ABI hands it and nothing else: no filesystem, no
// environment or arguments, no network, no stdin or stdout; wazero's fake
// clocks (the plugin's clock is the Now field of its requests), its
// deterministic random source and a sleep that returns at once. Standard
// error goes to the debug log, bounded per instance. Every module is
// metered before it is compiled (internal/wasmmeter): each function entry
// and loop header spends fuel, and a guest that has spent its fuel calls
// the host, which ends the call once its deadline has passed (guard.go).
// Without that a looping guest could never be stopped, and it would freeze
// the host's garbage collector. Memory is capped by
// Config.MemoryLimitPages.

// maxMeteredBytes bounds a metered module read back from the cache
// directory: the meter adds a few percent to a module of at most
// maxWasmBytes.
const maxMeteredBytes = 2 * maxWasmBytes

// engine is the one wazero Runtime of a Host, with its compilation cache.
type engine struct {
	rt    wazero.Runtime
	cache wazero.CompilationCache // nil without CacheDir
	kind  string                  // "compiler" or "interpreter"
	// meteredDir keeps the metered bytes of every module compiled, named
	// by their checksum, so that unparking skips the meter (recompile):
	// CacheDir/metered, "" without CacheDir.
	meteredDir string
	logger     *slog.Logger
}

// compilerSupported mirrors wazero's own platform check (which is internal):
// its optimizing compiler targets amd64 and arm64 on these systems.
func compilerSupported() bool {
	switch runtime.GOOS {
	case "linux", "darwin", "freebsd", "netbsd", "windows", "dragonfly", "solaris", "illumos":
	default:
		return false
	}
	return runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64"
}

// newEngine builds the Runtime: the compiler (the interpreter only where the
// compiler is unsupported), the memory ceiling, the file-backed compilation
// cache, WASI with nothing granted (see moduleConfig), and the meter's host
// function (see guard.go), which is what stops a guest that never returns.
// wazero's own WithCloseOnContextDone stays off: the meter does its job at a
// small part of its cost.
func newEngine(ctx context.Context, cfg *Config) (*engine, error) {
	e := &engine{kind: "compiler", logger: cfg.Logger}
	if e.logger == nil {
		e.logger = slog.New(slog.DiscardHandler)
	}
	var rc wazero.RuntimeConfig
	if compilerSupported() {
		rc = wazero.NewRuntimeConfigCompiler()
	} else {
		e.kind = "interpreter"
		rc = wazero.NewRuntimeConfigInterpreter()
	}
	rc = rc.WithMemoryLimitPages(cfg.MemoryLimitPages)
	if cfg.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("plugins: compilation cache %q: %w", cfg.CacheDir, err)
		}
		e.cache = c
		rc = rc.WithCompilationCache(c)
		e.meteredDir = filepath.Join(cfg.CacheDir, "metered")
	}
	e.rt = wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, e.rt); err != nil {
		e.close(ctx)
		return nil, fmt.Errorf("plugins: WASI: %w", err)
	}
	if err := instantiateMeter(ctx, e.rt); err != nil {
		e.close(ctx)
		return nil, fmt.Errorf("plugins: meter: %w", err)
	}
	return e, nil
}

// compile meters wasm (wasmmeter.Instrument) and compiles the result. It
// returns the metered bytes too, for keepMetered once the caller has
// accepted the module.
func (e *engine) compile(ctx context.Context, wasm []byte) (wazero.CompiledModule, []byte, error) {
	metered, _, err := wasmmeter.Instrument(wasm, meterFuel)
	if err != nil {
		return nil, nil, err
	}
	c, err := e.rt.CompileModule(ctx, metered)
	if err != nil {
		return nil, nil, err
	}
	return c, metered, nil
}

// recompile compiles again a module compile metered, from the copy
// keepMetered kept under its checksum sum. It reports false, and compiles
// nothing, when there is no such copy or it is not those bytes any more: the
// caller then meters the source again. Anything at that path but a regular
// file holding those bytes is logged and removed, so that keepMetered can
// write it anew. Reading and checking the copy takes a few milliseconds;
// metering a Go plugin again takes tens.
func (e *engine) recompile(ctx context.Context, sum string) (wazero.CompiledModule, bool, error) {
	if e.meteredDir == "" || sum == "" {
		return nil, false, nil
	}
	path := filepath.Join(e.meteredDir, sum+".wasm")
	fail := func(msg string, err error) (wazero.CompiledModule, bool, error) {
		e.logger.Warn("plugins: "+msg+"; metering its source again", "path", path, "err", err)
		_ = os.Remove(path)
		return nil, false, nil
	}
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case err != nil:
		return fail("cannot read a metered module", err)
	case !st.Mode().IsRegular(): // a FIFO would block the read
		return fail("a metered module is not a regular file", fmt.Errorf("mode %v", st.Mode()))
	}
	metered, err := readFile(path, maxMeteredBytes)
	if err != nil {
		return fail("cannot read a metered module", err)
	}
	if sha256Hex(metered) != sum {
		return fail("a metered module changed on disk", errors.New("checksum mismatch"))
	}
	c, err := e.rt.CompileModule(ctx, metered)
	return c, true, err
}

// keepMetered returns the checksum of metered and, with a cache directory,
// writes it there under that checksum unless a file is there already. The
// write is atomic (a temporary file renamed), so a reader sees the whole
// module or none; a failure only costs recompile its shortcut, and is
// logged.
func (e *engine) keepMetered(metered []byte) string {
	sum := sha256Hex(metered)
	if e.meteredDir == "" {
		return sum
	}
	path := filepath.Join(e.meteredDir, sum+".wasm")
	if _, err := os.Lstat(path); err == nil {
		// In use again: pruneMetered goes by the time of the last load. A
		// copy another process pruned meanwhile is written again below.
		now := time.Now()
		if err := os.Chtimes(path, now, now); !errors.Is(err, fs.ErrNotExist) {
			return sum
		}
	}
	err := func() error {
		if err := os.MkdirAll(e.meteredDir, 0o755); err != nil {
			return err
		}
		f, err := os.CreateTemp(e.meteredDir, ".tmp-*")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name()) // after the rename, a no-op
		if _, err := f.Write(metered); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return os.Rename(f.Name(), path)
	}()
	if err != nil {
		e.logger.Warn("plugins: cannot keep a metered module; unparking it will meter it again", "dir", e.meteredDir, "err", err)
	}
	return sum
}

// Pruning of the metered copies (pruneMetered).
const (
	// meteredMaxAge is how long a copy no loaded version uses stays, after
	// the last load of its module by any process: processes may share the
	// cache directory (a rolling restart, another gateway) and each loses
	// only its shortcut if a copy it uses goes.
	meteredMaxAge = 24 * time.Hour
	// meteredTmpMaxAge is the age past which a temporary file is the
	// leftover of a write that never finished (a crash); a write takes
	// milliseconds.
	meteredTmpMaxAge = time.Hour
)

// pruneMetered removes from the metered directory the copies no version in
// inUse (checksums) uses and no process has loaded for meteredMaxAge, and the
// temporary files older than meteredTmpMaxAge. It touches nothing else: only
// regular files named as keepMetered names them. It returns how many files it
// removed; what it cannot remove is logged and left.
func (e *engine) pruneMetered(inUse map[string]bool, now time.Time) int {
	if e.meteredDir == "" {
		return 0
	}
	ents, err := os.ReadDir(e.meteredDir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			e.logger.Warn("plugins: cannot list the metered modules to prune them", "dir", e.meteredDir, "err", err)
		}
		return 0
	}
	removed := 0
	for _, ent := range ents {
		name := ent.Name()
		var maxAge time.Duration
		switch sum, ok := strings.CutSuffix(name, ".wasm"); {
		case strings.HasPrefix(name, ".tmp-"):
			maxAge = meteredTmpMaxAge
		case ok && isSHA256Hex(sum) && !inUse[sum]:
			maxAge = meteredMaxAge
		default:
			continue
		}
		info, err := ent.Info()
		if err != nil || !info.Mode().IsRegular() || now.Sub(info.ModTime()) < maxAge {
			continue
		}
		path := filepath.Join(e.meteredDir, name)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			e.logger.Warn("plugins: cannot remove an unused metered module", "path", path, "err", err)
			continue
		}
		removed++
	}
	return removed
}

// isSHA256Hex reports whether s is a lower-case hex sha256, as sha256Hex
// writes it.
func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func (e *engine) close(ctx context.Context) {
	_ = e.rt.Close(ctx)
	if e.cache != nil {
		_ = e.cache.Close(ctx)
	}
}

// moduleConfig is the sandbox of every instance: an anonymous module (so a
// plugin can be instantiated many times), the reactor's _initialize as the
// only start function, and nothing granted. wazero's defaults already deny
// the rest: no filesystem mounts, no environment, no arguments, no stdin or
// stdout, a fake wall clock fixed in the past and a fake monotonic clock,
// deterministic "randomness", and a sleep that returns at once. The plugin's
// only clock is the Now field of its requests. Standard error goes to a
// bounded debug log so that a guest's own panic message can be diagnosed.
func moduleConfig(stderr *stderrLog) wazero.ModuleConfig {
	return wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions("_initialize").
		WithStderr(stderr)
}

// stderrBudget is how many bytes of a single instance's standard error are
// logged; the rest is dropped. stderrTail is how much of its end is kept to
// be quoted in the log line of a failure; stderrLine is the longest line
// logged as one record.
const (
	stderrBudget = 4 << 10
	stderrTail   = 512
	stderrLine   = 256
)

// stderrLog takes a guest's standard error: it logs it line by line at debug
// level, at most stderrBudget bytes per instance, and keeps the last
// stderrTail bytes (a Go guest's "panic: …" or "fatal error: out of memory")
// for the warning logged when the instance fails. Plugins are handed
// summaries (token counts, model names), never prompts, so there is no
// request content to leak here.
type stderrLog struct {
	logger *slog.Logger
	plugin string

	mu   sync.Mutex
	left int    // bytes that may still be logged
	line []byte // the current, unfinished line
	tail []byte
}

func newStderrLog(logger *slog.Logger, plugin string) *stderrLog {
	return &stderrLog{logger: logger, plugin: plugin, left: stderrBudget}
}

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	keep := p
	if len(keep) > stderrTail {
		keep = keep[len(keep)-stderrTail:]
	}
	w.tail = append(w.tail, keep...)
	if len(w.tail) > stderrTail {
		w.tail = append(w.tail[:0], w.tail[len(w.tail)-stderrTail:]...)
	}
	if w.left <= 0 || !w.logger.Enabled(context.Background(), slog.LevelDebug) {
		return len(p), nil
	}
	for _, c := range p {
		if c == '\n' || len(w.line) >= stderrLine {
			w.flush()
			if c == '\n' {
				continue
			}
		}
		w.line = append(w.line, c)
	}
	return len(p), nil
}

// flush logs the current line within the budget. w.mu held.
func (w *stderrLog) flush() {
	text := w.line
	w.line = w.line[:0]
	if w.left <= 0 {
		return
	}
	if len(text) > w.left {
		text = text[:w.left]
	}
	w.left -= len(text) + 1
	w.logger.Debug("plugin stderr", "plugin", w.plugin, "line", string(text))
}

// last returns the kept end of the guest's standard error.
func (w *stderrLog) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.tail)
}
