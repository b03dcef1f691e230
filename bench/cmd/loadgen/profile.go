package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// profiler fetches profiles of the gateway from its net/http/pprof endpoint
// (relay serve's debug_listen) at chosen moments of the run: a CPU profile over a
// measurement, a heap profile while the streams are open.
type profiler struct {
	base string // e.g. http://127.0.0.1:6060
	dir  string
	log  func(format string, args ...any)
	c    *http.Client
}

func newProfiler(base, dir string, log func(string, ...any)) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &profiler{base: base, dir: dir, log: log, c: &http.Client{Timeout: 10 * time.Minute}}, nil
}

// cpu starts a CPU profile of du (whole seconds, at least 1) and returns a
// function that waits for it to be saved as name.pprof.
func (p *profiler) cpu(ctx context.Context, name string, du time.Duration) (wait func()) {
	if p == nil {
		return func() {}
	}
	secs := max(1, int(math.Round(du.Seconds())))
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.fetch(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), name+".pprof")
	}()
	return func() { <-done }
}

// snapshot saves /debug/pprof/KIND as name.pprof (or name.txt with debug=1).
func (p *profiler) snapshot(ctx context.Context, kind, name string) {
	if p == nil {
		return
	}
	p.fetch(ctx, "/debug/pprof/"+kind, name)
}

func (p *profiler) fetch(ctx context.Context, path, file string) {
	req, err := http.NewRequestWithContext(ctx, "GET", p.base+path, nil)
	if err != nil {
		p.log("profile %s: %v", file, err)
		return
	}
	resp, err := p.c.Do(req)
	if err != nil {
		p.log("profile %s: %v", file, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		p.log("profile %s: HTTP %d: %s", file, resp.StatusCode, msg)
		return
	}
	out := filepath.Join(p.dir, file)
	f, err := os.Create(out)
	if err != nil {
		p.log("profile %s: %v", file, err)
		return
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		p.log("profile %s: %v", file, err)
	}
	if err := f.Close(); err != nil {
		p.log("profile %s: %v", file, err)
	}
	p.log("profile saved: %s", out)
}
