package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelrelay/modelrelay/gateway"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/internal/logagg"
	"github.com/modelrelay/modelrelay/internal/shared"
	"github.com/modelrelay/modelrelay/plugins"
	"github.com/modelrelay/modelrelay/store"
)

func runServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	path := fs.String("config", "relay.yaml", "configuration file")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return exitCode(2)
	}
	log, closeLog, err := newLogger(*level)
	if err != nil {
		return err
	}
	defer closeLog()
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	if _, err := presizeFDTable(fdTableTarget); err != nil {
		log.Warn("the file descriptor table could not be grown at start; it will grow under load", "error", err.Error())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := startServer(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "relay: gateway listening on http://%s\n", srv.addr)
	if srv.consoleAddr != "" {
		fmt.Fprintf(os.Stderr, "relay: console listening on http://%s/console/\n", srv.consoleAddr)
	}
	<-ctx.Done()
	return srv.shutdown(30 * time.Second)
}

// newLogger returns the process logger on stderr (newLoggerTo).
func newLogger(level string) (*slog.Logger, func(), error) {
	return newLoggerTo(os.Stderr, level)
}

// newLoggerTo returns the JSON logger on w, buffered (logSink), with
// repeated warnings and errors aggregated per 10 s (logagg: a storm of one
// warning is two lines, not one per request), and the function that writes
// the pending summaries and flushes the sink for good.
func newLoggerTo(w io.Writer, level string) (*slog.Logger, func(), error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, nil, fmt.Errorf("-log-level: %q is not debug, info, warn or error", level)
	}
	sink := newLogSink(w, 100*time.Millisecond)
	agg := logagg.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: l}), logAggregateEvery)
	return slog.New(agg), func() { agg.Close(); sink.Close() }, nil
}

// logAggregateEvery is how often the log writes the summary of a repeated
// warning or error.
const logAggregateEvery = 10 * time.Second

// server is a running gateway with everything it owns.
type server struct {
	addr        string
	gw          *gateway.Gateway
	http        *http.Server
	metrics     *http.Server
	debug       *http.Server // nil without debug_listen
	console     *http.Server // on console.listen; nil when the console shares the gateway's listener
	consoleAddr string
	store       store.Store
	shared      *shared.Client // nil without redis.url
	host        *plugins.Host
	log         *slog.Logger
	done        chan error
}

// startServer composes the gateway from its configuration's sections: the
// memory limit (Memory), the store (Store, with data_dir and sync_writes),
// the plugin host (Plugins) and Redis (Redis), then starts serving. It
// resolves holds left by a crash first. ln may be nil (listen on cfg.Listen).
func startServer(ctx context.Context, cfg config.Config, log *slog.Logger, ln net.Listener) (*server, error) {
	if err := checkDebugListen(cfg); err != nil {
		return nil, err
	}
	cfg.Memory.Apply(log)
	st, err := openStore(ctx, cfg.Store, cfg.LocalConfig, log)
	if err != nil {
		return nil, err
	}
	host, err := plugins.Open(ctx, cfg.Plugins.HostConfig(log))
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("plugins: %w", err)
	}
	var sh *shared.Client
	if cfg.Redis.Enabled() {
		if sh, err = shared.Open(cfg.Redis, log); err != nil {
			host.Close(context.Background())
			st.Close()
			return nil, err
		}
	} else if cfg.Store.Driver == store.DriverPostgres {
		log.Warn("store.driver is postgres but no redis.url is set: money is shared by every replica, but rate limits, key revocations (up to the key cache's 10 s), upstream cooldowns and read-after-answer are per replica")
	}
	closeAll := func() {
		host.Close(context.Background())
		if sh != nil {
			sh.Close()
		}
		st.Close()
	}
	gw, err := gateway.New(gateway.Options{Config: cfg, Store: st, Plugins: host, Logger: log, Shared: sh})
	if err != nil {
		closeAll()
		return nil, err
	}
	if ln == nil {
		ln, err = net.Listen("tcp", cfg.Listen)
		if err != nil {
			closeAll()
			return nil, err
		}
	}
	s := &server{addr: ln.Addr().String(), gw: gw, store: st, shared: sh, host: host, log: log, done: make(chan error, 3)}
	s.http = &http.Server{
		Handler:  gw.Handler(),
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	gw.ConfigureServer(s.http) // a deadline per phase of a request (server: in the config)
	go func() { s.done <- s.http.Serve(gw.Listener(ln)) }()
	if cfg.MetricsListen != "" {
		mln, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			s.shutdown(time.Second)
			return nil, fmt.Errorf("metrics_listen: %w", err)
		}
		s.metrics = &http.Server{Handler: gw.OpsHandler()}
		gw.ConfigureServer(s.metrics)
		go func() { s.done <- s.metrics.Serve(mln) }()
	}
	if cfg.DebugListen != "" {
		if s.debug, err = startDebug(cfg.DebugListen, s.done); err != nil {
			s.shutdown(time.Second)
			return nil, err
		}
		log.Info("profiler listening", "addr", cfg.DebugListen)
	}
	if err := s.startConsole(cfg); err != nil {
		s.shutdown(time.Second)
		return nil, err
	}
	return s, nil
}

// startConsole serves the web console on console.listen when it has a
// listener of its own.
func (s *server) startConsole(cfg config.Config) error {
	h := s.gw.ConsoleHandler()
	if h == nil {
		return nil
	}
	ln, err := net.Listen("tcp", cfg.Console.Listen)
	if err != nil {
		return fmt.Errorf("console.listen: %w", err)
	}
	s.consoleAddr = ln.Addr().String()
	s.console = &http.Server{Handler: h, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	s.gw.ConfigureServer(s.console)
	go func() { s.done <- s.console.Serve(ln) }()
	return nil
}

// shutdown stops accepting, lets in-flight calls (streams included) finish
// for up to grace, cuts what is left, waits for their settlement, then
// closes plugins and the ledger.
func (s *server) shutdown(grace time.Duration) error {
	s.log.Info("shutting down", "grace", grace.String())
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.log.Warn("grace period over; cutting open connections", "error", err.Error())
		_ = s.http.Close()
	}
	if s.metrics != nil {
		_ = s.metrics.Close()
	}
	if s.debug != nil {
		_ = s.debug.Close()
	}
	if s.console != nil {
		_ = s.console.Close()
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	if err := s.gw.Drain(dctx); err != nil {
		s.log.Error("in-flight calls did not settle in time", "error", err.Error())
	}
	var errs []string
	if err := s.host.Close(context.Background()); err != nil {
		errs = append(errs, err.Error())
	}
	if s.shared != nil {
		_ = s.shared.Close() // nothing of value is left in it
	}
	if err := s.store.Close(); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
