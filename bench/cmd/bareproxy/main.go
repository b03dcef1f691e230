package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bareproxy:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("bareproxy", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9201", "listen address")
	upstream := fs.String("target", "http://127.0.0.1:9101", "upstream base URL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	target, err := parseTarget(*upstream)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           newHandler(target),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(os.Stderr, "bareproxy: http://%s -> %s\n", ln.Addr(), target)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// parseTarget accepts an absolute http(s) URL with a host.
func parseTarget(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-target: %q is not an http(s) URL", s)
	}
	return u, nil
}

// newHandler serves the proxy in full-duplex mode. By default the HTTP/1
// server discards and closes the unread request body once the handler starts
// its response; the proxy's transport, which still reads that body (after
// copying Content-Length bytes it reads once more to check for excess),
// then fails and tears down the upstream connection mid-response — about
// 0.5% of streams through a plain ReverseProxy end in "unexpected EOF"
// (golang/go#40747). Full duplex keeps the body readable. It changes
// nothing else.
func newHandler(target *url.URL) http.Handler {
	rp := newProxy(target)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	})
}

// newProxy is the whole floor: the standard library's reverse proxy, every
// write flushed, upstream connections pooled like a gateway line's.
func newProxy(target *url.URL) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
		},
		FlushInterval: -1,
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   512,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		ErrorLog: log.New(os.Stderr, "bareproxy: ", 0),
	}
}
