// Package cutproxy is a TCP proxy for tests that a test can cut and restore
// on the same address: a database or a Redis that stops and starts again, as
// its clients see it, while the real server (which other tests use) is
// never touched. It can also slow the server down without breaking
// anything: a latency on every chunk forwarded (SetDelay), and a pause that
// holds what is sent until it ends (Pause, Resume).
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
	conns map[net.Conn]func() // each open connection, and what ends its pipe
	// stalled: bytes are read and dropped instead of forwarded (Stall).
	stalled atomic.Bool
	// delay: how long each chunk waits before it is written (SetDelay).
	delay atomic.Int64
	// paused: non-nil while paused (Pause); Resume closes it.
	paused chan struct{}
}

// Start listens on a new loopback address, forwarding to target, and cuts
// everything when t ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{target: target, addr: "127.0.0.1:0", conns: map[net.Conn]func(){}}
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
	closed := make(chan struct{}) // both connections are closed
	end := sync.OnceFunc(func() { c.Close(); s.Close(); close(closed) })
	p.conns[c], p.conns[s] = end, end
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.copy(s, c, closed); done <- struct{}{} }()
	go func() { p.copy(c, s, closed); done <- struct{}{} }()
	<-done
	end()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// chunk is what one read brought, and when it may be written.
type chunk struct {
	b   []byte
	due time.Time
}

// copy forwards src to dst until either ends, dropping what it reads while
// the proxy is stalled. A reader queues each chunk with the time it is due
// (now plus the delay) and the writer writes them in order, each once it
// is due and the proxy is not paused: a delay adds latency, not a limit on
// throughput, and a pause holds bytes instead of dropping them (the reader
// stops once 256 chunks wait). closed ends a writer still waiting.
func (p *Proxy) copy(dst, src net.Conn, closed <-chan struct{}) {
	chunks := make(chan chunk, 256)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 && !p.stalled.Load() {
				select {
				case chunks <- chunk{buf[:n], time.Now().Add(time.Duration(p.delay.Load()))}:
				case <-closed:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		if !p.wait(c.due, closed) {
			return
		}
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}

// wait waits until due and until the proxy is not paused; false if closed
// first.
func (p *Proxy) wait(due time.Time, closed <-chan struct{}) bool {
	if d := time.Until(due); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-closed:
			t.Stop()
			return false
		}
	}
	for {
		p.mu.Lock()
		gate := p.paused
		p.mu.Unlock()
		if gate == nil {
			return true
		}
		select {
		case <-gate:
		case <-closed:
			return false
		}
	}
}

// SetDelay makes every chunk forwarded, either way, wait d before it is
// written, in order: a database d further away (a round trip gains 2d).
// Zero forwards at once again; chunks already read keep their time.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Pause stops forwarding, as a database that stops answering for a while
// looks to its clients: connections stay open, new ones are accepted, and
// what either side sends is held, not dropped (unlike Stall), until Resume
// forwards it all, in order.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused == nil {
		p.paused = make(chan struct{})
	}
}

// Resume forwards again what Pause held, and what comes next.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused != nil {
		close(p.paused)
		p.paused = nil
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
	for c, end := range p.conns {
		end() // closes c, and ends a pipe held by a pause
		delete(p.conns, c)
	}
}
