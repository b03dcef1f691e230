package plugins

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/internal/testwait"
)

// waitParked waits until plugin is parked (or not, per want). A park
// marks the pool parked, then closes its instances: a parked pool is
// waited for until its last instance is gone, so a loaded machine's
// snapshot in between does not read as a park that kept one.
func waitParked(t *testing.T, h *Host, plugin string, want bool) PoolStats {
	t.Helper()
	var s PoolStats
	testwait.For(t, 10*time.Second, fmt.Sprintf("%s: parked = %v", plugin, want), func() bool {
		s = stats(t, h, plugin)
		return s.Parked == want && (!want || s.Instances == 0)
	})
	return s
}

// A plugin with no calls for IdleRelease is parked: its instances are
// closed. Its next call loads it again and answers exactly as before.
func TestParkAndUnpark(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "tokens", "lines")
	h, logs := openDir(t, dir, Config{IdleRelease: 50 * time.Millisecond})
	ctx := context.Background()
	before, err := h.Admit(ctx, tokensAdmit())
	if err != nil {
		t.Fatal(err)
	}
	s := waitParked(t, h, "tokens", true)
	if s.Instances != 0 || s.Idle != 0 || s.Parks == 0 {
		t.Errorf("parked tokens: %+v, want no instances and a park counted", s)
	}
	if m, ok := h.Catalog().Model("modelb-6-astra"); !ok || len(m.Routes) == 0 {
		t.Error("a parked plugin's models left the catalogue")
	}
	after, err := h.Admit(ctx, tokensAdmit())
	if err != nil {
		t.Fatalf("Admit on a parked plugin: %v", err)
	}
	if after.Hold != before.Hold || after.Hold == 0 {
		t.Errorf("hold after unparking %d, before %d", after.Hold, before.Hold)
	}
	if s := stats(t, h, "tokens"); s.Unparks != 1 {
		t.Errorf("unparks = %d, want 1 (%+v)", s.Unparks, s)
	}
	if !contains(logs.String(), "plugin parked", "plugin=tokens", "loaded again after being parked") {
		t.Errorf("park and unpark not logged:\n%s", logs.String())
	}
}

// Calls that arrive together at a parked plugin load it once and all succeed.
func TestUnparkConcurrentCalls(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "tokens", "lines")
	h, _ := openDir(t, dir, Config{IdleRelease: 50 * time.Millisecond})
	waitParked(t, h, "tokens", true)
	ctx := context.Background()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 16 {
		wg.Go(func() {
			<-start
			if _, err := h.Admit(ctx, tokensAdmit()); err != nil {
				t.Errorf("Admit: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if s := stats(t, h, "tokens"); s.Unparks != 1 {
		t.Errorf("unparks = %d, want 1: concurrent callers must share one load (%+v)", s.Unparks, s)
	}
}

// A version is not parked while a call holds it or while anything besides
// the catalogue holds a reference (an instance being created).
func TestParkWaitsForUse(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "tokens", "lines")
	h, _ := openDir(t, dir, Config{IdleRelease: -1})
	v := h.Catalog().versions["tokens"]
	later := time.Now().Add(time.Hour)
	v.life.RLock() // a call in progress
	if v.park(time.Millisecond, later) {
		t.Error("parked while a call held the version")
	}
	v.life.RUnlock()
	if !v.acquire() {
		t.Fatal("acquire")
	}
	if v.park(time.Millisecond, later) {
		t.Error("parked while a second reference was held")
	}
	v.release()
	if v.park(time.Hour, time.Now()) {
		t.Error("parked a version used less than the idle time ago")
	}
	if !v.park(time.Millisecond, later) {
		t.Fatal("an idle version was not parked")
	}
	if _, err := h.Admit(context.Background(), tokensAdmit()); err != nil {
		t.Fatal(err)
	}
	if stats(t, h, "tokens").Parked {
		t.Error("still parked after a call")
	}
	if s := stats(t, h, "lines"); s.Parked || s.Parks != 0 {
		t.Errorf("IdleRelease < 0 must never park: %+v", s)
	}
}

// A parked plugin whose file changed on disk is not rebuilt from the new
// file behind the catalogue's back, and the call does not fail either: it
// reloads the directory and runs on the version loaded from the new file.
func TestUnparkAfterFileChanged(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "tokens", "lines")
	h, logs := openDir(t, dir, Config{IdleRelease: -1})
	v := h.Catalog().versions["tokens"]
	before := info(t, h, "tokens")
	if !v.park(0, time.Now().Add(time.Hour)) {
		t.Fatal("park")
	}
	path := filepath.Join(dir, "tokens.wasm")
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The same module with an extra custom section: another file.
	writeFile(t, path, append(slices.Clone(wasm), 0, 4, 1, 'x', 'y', 'z'))
	if _, err := h.Admit(context.Background(), tokensAdmit()); err != nil {
		t.Fatalf("Admit on a parked plugin whose file changed: %v", err)
	}
	after := info(t, h, "tokens")
	if after.SHA256 == before.SHA256 {
		t.Errorf("still serving the old file (%s)", after.SHA256)
	}
	waitDone(t, v)
	if !contains(logs.String(), "plugins reloaded", "replaced") {
		t.Errorf("the reload was not logged:\n%s", logs.String())
	}
}

// Parking a version that a reload has just retired (the janitor walks a
// snapshot of the catalogue) leaves it to shut down, without blocking.
func TestParkRetiredVersion(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "tokens", "lines")
	h, _ := openDir(t, dir, Config{IdleRelease: -1})
	v := h.Catalog().versions["tokens"]
	if !v.acquire() { // a call in flight keeps it alive after the retire
		t.Fatal("acquire")
	}
	v.retire()
	done := make(chan bool)
	go func() { done <- v.park(0, time.Now().Add(time.Hour)) }()
	select {
	case parked := <-done:
		if parked {
			t.Error("a retired version was parked")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("park of a retired version blocked")
	}
	v.release()
	waitDone(t, v)
}

// Calls racing the janitor, which parks as soon as a plugin is idle for a
// millisecond: every call succeeds (run with -race).
func TestParkRacingCalls(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "tokens", "lines")
	h, _ := openDir(t, dir, Config{IdleRelease: time.Millisecond})
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := time.Now().Add(500 * time.Millisecond)
	for g := range 4 {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				if _, err := h.Admit(ctx, tokensAdmit()); err != nil {
					t.Errorf("Admit: %v", err)
					return
				}
				time.Sleep(time.Duration((i*7+g*3)%12) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if s := stats(t, h, "tokens"); s.Parks == 0 || s.Unparks == 0 {
		t.Logf("the janitor never raced a call (%+v)", s)
	}
}

// An unpark compiles the metered copy the engine kept at load, checked
// against the checksum in memory. A copy that changed on disk is not used:
// the file is metered again, and the copy is written anew.
func TestUnparkFromMeteredCopy(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir() // a cache of its own: the test spoils a copy
	stage(t, dir, "tokens", "lines")
	h, logs := openDir(t, dir, Config{IdleRelease: -1, CacheDir: cache})
	v := h.Catalog().versions["tokens"]
	kept := filepath.Join(cache, "metered", v.meteredSum+".wasm")
	if b, err := os.ReadFile(kept); err != nil || sha256Hex(b) != v.meteredSum {
		t.Fatalf("the metered copy %s: %v", kept, err)
	}
	want, err := h.Admit(context.Background(), tokensAdmit())
	if err != nil {
		t.Fatal(err)
	}
	unpark := func(from string) {
		t.Helper()
		// A call may leave the pool creating an instance in the background,
		// which holds the version until it is done.
		testwait.For(t, 10*time.Second, "park", func() bool { return v.park(0, time.Now().Add(time.Hour)) })
		got, err := h.Admit(context.Background(), tokensAdmit())
		if err != nil || got.Hold != want.Hold {
			t.Fatalf("Admit after unparking: %+v, %v; want hold %d", got, err, want.Hold)
		}
		if !contains(logs.String(), "loaded again after being parked", "plugin=tokens", `from="`+from+`"`) {
			t.Fatalf("unpark not logged as from %q:\n%s", from, logs.String())
		}
	}
	unpark("the metered copy")

	writeFile(t, kept, []byte("\x00asm\x01\x00\x00\x00"))
	unpark("the file, metered again")
	if !contains(logs.String(), "a metered module changed on disk") {
		t.Errorf("the spoiled copy was not reported:\n%s", logs.String())
	}
	if b, err := os.ReadFile(kept); err != nil || sha256Hex(b) != v.meteredSum {
		t.Fatalf("the metered copy was not written again: %v", err)
	}
	if s := stats(t, h, "tokens"); s.Unparks != 2 {
		t.Errorf("unparks = %d, want 2", s.Unparks)
	}
}
