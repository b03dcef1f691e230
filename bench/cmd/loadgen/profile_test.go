package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestProfiler(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dir := t.TempDir()
	var logs []string
	p, err := newProfiler(srv.URL, filepath.Join(dir, "prof"), func(f string, a ...any) { logs = append(logs, f) })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wait := p.cpu(ctx, "cpu-x", 300*time.Millisecond) // rounds up to 1 s
	start := time.Now()
	wait()
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Fatalf("CPU profile returned after %v, want about 1 s", d)
	}
	p.snapshot(ctx, "heap", "heap.pprof")
	p.snapshot(ctx, "goroutine?debug=1", "goroutines.txt")
	p.snapshot(ctx, "nonesuch", "none.pprof")
	for _, f := range []string{"cpu-x.pprof", "heap.pprof", "goroutines.txt"} {
		st, err := os.Stat(filepath.Join(dir, "prof", f))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	g, _ := os.ReadFile(filepath.Join(dir, "prof", "goroutines.txt"))
	if !strings.HasPrefix(string(g), "goroutine profile:") {
		t.Errorf("goroutines.txt starts %q", g[:min(len(g), 40)])
	}
	if _, err := os.Stat(filepath.Join(dir, "prof", "none.pprof")); err == nil {
		t.Error("a failed fetch left a file")
	}
	if !strings.Contains(strings.Join(logs, "\n"), "HTTP %d") {
		t.Errorf("the 404 was not logged: %q", logs)
	}

	var nilp *profiler // profiling off: every hook is a no-op
	nilp.cpu(ctx, "x", time.Second)()
	nilp.snapshot(ctx, "heap", "x")
}
