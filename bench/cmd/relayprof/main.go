package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/modelrelay/modelrelay/gateway"
	"github.com/modelrelay/modelrelay/plugins"
	"github.com/modelrelay/modelrelay/store/badger"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "relayprof:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("relayprof", flag.ContinueOnError)
	path := fs.String("config", "relay.yaml", "gateway configuration file")
	pprofAddr := fs.String("pprof", "127.0.0.1:6060", "address of the profiler (/debug/pprof/)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	mutex := fs.Int("mutex-fraction", 0, "runtime.SetMutexProfileFraction (0 = off)")
	block := fs.Int("block-rate", 0, "runtime.SetBlockProfileRate in ns (0 = off)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("-log-level: %q is not debug, info, warn or error", *level)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))
	cfg, err := gateway.LoadConfig(*path)
	if err != nil {
		return err
	}
	cfg.Memory.Apply(log) // as relay serve does
	runtime.SetMutexProfileFraction(*mutex)
	runtime.SetBlockProfileRate(*block)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	st, err := badger.Open(cfg.DataDir+"/ledger", badger.Options{SyncWrites: *cfg.SyncWrites, Logger: log})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.RecoverHolds(ctx); err != nil {
		return fmt.Errorf("recover holds: %w", err)
	}
	host, err := plugins.Open(ctx, cfg.Plugins.HostConfig(log))
	if err != nil {
		return fmt.Errorf("plugins: %w", err)
	}
	defer host.Close(context.Background())
	gw, err := gateway.New(gateway.Options{Config: cfg, Store: st, Plugins: host, Logger: log})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	pln, err := net.Listen("tcp", *pprofAddr)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: gw.Handler(), ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	gw.ConfigureServer(srv) // as relay serve: a deadline per phase of a request
	psrv := &http.Server{Handler: profiler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(gw.Listener(ln)) }()
	go func() { errc <- psrv.Serve(pln) }()
	fmt.Fprintf(os.Stderr, "relayprof: gateway on http://%s, profiler on http://%s/debug/pprof/\n", ln.Addr(), pln.Addr())

	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			log.Error("server stopped", "error", err.Error())
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = psrv.Close()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return gw.Drain(sctx)
}

// profiler serves net/http/pprof's handlers on their own mux (the package's
// init registers them on http.DefaultServeMux, which nothing here serves).
func profiler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
