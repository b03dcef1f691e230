// Package cutproxy is a TCP proxy for tests that a test can cut and restore
// on the same address: a database or a Redis that stops and starts again, as
// its clients see it, while the real server (which other tests use) is
// never touched.
package cutproxy

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards connections on Addr to a target.
type Proxy struct {
	target, addr string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	// stalled: bytes are read and dropped instead of forwarded (Stall).
	stalled atomic.Bool
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
	go func() { p.copy(s, c); done <- struct{}{} }()
	go func() { p.copy(c, s); done <- struct{}{} }()
	<-done
	c.Close()
	s.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// copy forwards src to dst until either ends, dropping what it reads while
// the proxy is stalled.
func (p *Proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.stalled.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Stall makes the proxy a black hole, as a server that hangs or a network
// that drops packets looks to its clients: connections stay open and new
// ones are accepted, but nothing is forwarded either way until Unstall
// (what was dropped stays lost; a client's connection is then out of step).
func (p *Proxy) Stall() { p.stalled.Store(true) }

// Unstall forwards again.
func (p *Proxy) Unstall() { p.stalled.Store(false) }

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
