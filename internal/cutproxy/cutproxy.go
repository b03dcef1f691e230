// Package cutproxy is a TCP proxy for tests that a test can cut and restore
// on the same address: a database or a Redis that stops and starts again, as
// its clients see it, while the real server (which other tests use) is
// never touched.
package cutproxy

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards connections on Addr to a target.
type Proxy struct {
	target, addr string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

// Start listens on a new loopback address, forwarding to target, and cuts
// everything when t ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{target: target, addr: "127.0.0.1:0", conns: map[net.Conn]struct{}{}}
	p.Restore(t)
	t.Cleanup(p.Cut)
	return p
}

// Addr is the proxy's address, the same after a Restore.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// Restore listens again on the proxy's address (a new one the first time).
func (p *Proxy) Restore(t testing.TB) {
	t.Helper()
	var (
		ln  net.Listener
		err error
	)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ln, err = net.Listen("tcp", p.Addr()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cutproxy: cannot listen on %s again: %v", p.Addr(), err)
		}
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go p.serve(ln)
}

func (p *Proxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(ln, c)
	}
}

// pipe joins c to a new connection to the target until either side ends
// or the proxy is cut.
func (p *Proxy) pipe(ln net.Listener, c net.Conn) {
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln != ln { // cut since the accept
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
	<-done
	c.Close()
	s.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// Cut closes the listener (new connections are refused) and every open
// connection.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}
