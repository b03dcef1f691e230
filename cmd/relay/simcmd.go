package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelrelay/modelrelay/sim"
)

func runSim(args []string) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9090", "listen address")
	var opts sim.Options
	opts.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return exitCode(2)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: sim.New(opts), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(os.Stderr, "relay sim: simulated provider listening on http://%s\n", ln.Addr())
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}
