package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/modelrelay/modelrelay/gateway/config"
)

// checkDebugListen refuses a debug_listen that names the address of the
// gateway or of its metrics: the profiler must never share a listener with
// what callers or scrapers reach.
func checkDebugListen(cfg config.Config) error {
	switch cfg.DebugListen {
	case "":
		return nil
	case cfg.Listen:
		return fmt.Errorf("debug_listen %q is the gateway's listen address: the profiler needs an address of its own", cfg.DebugListen)
	case cfg.MetricsListen:
		return fmt.Errorf("debug_listen %q is metrics_listen: the profiler needs an address of its own", cfg.DebugListen)
	}
	return nil
}

// startDebug serves the profiler on addr. Its only timeout is on reading
// the request's header: a CPU profile or an execution trace answers after
// the seconds it was asked for, which the gateway's write deadline would cut.
func startDebug(addr string, done chan<- error) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug_listen: %w", err)
	}
	srv := &http.Server{Handler: profiler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { done <- srv.Serve(ln) }()
	return srv, nil
}

// profiler serves net/http/pprof's handlers on a mux of their own (the
// package's init registers them on http.DefaultServeMux, which nothing in
// the gateway serves). /debug/pprof/ also serves every named profile:
// heap, allocs, goroutine, mutex, block, threadcreate.
func profiler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
