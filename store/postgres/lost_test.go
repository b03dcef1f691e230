package postgres

import (
	"bytes"
	"context"
	"errors"

	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/store"
)

// lossyProxy forwards TCP connections to PostgreSQL. Once a client has sent
// bytes containing trigger (the first time only), the server's answers on
// that connection are dropped, as a network failing mid-statement drops
// them: the statement runs and commits, and the client never hears of it.
// cut closes every connection.
type lossyProxy struct {
	target  string
	trigger []byte
	armed   atomic.Bool
	ln      net.Listener

	mu    sync.Mutex
	conns []net.Conn
}

func newLossyProxy(t *testing.T, target, trigger string) *lossyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{target: target, trigger: []byte(trigger), ln: ln}
	p.armed.Store(true)
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
	return p
}

func (p *lossyProxy) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, s)
	p.mu.Unlock()
	var lost atomic.Bool
	go func() { // client → server, watching for the trigger
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			if bytes.Contains(buf[:n], p.trigger) && p.armed.CompareAndSwap(true, false) {
				lost.Store(true)
			}
			if _, werr := s.Write(buf[:n]); werr != nil || err != nil {
				s.Close()
				return
			}
		}
	}()
	buf := make([]byte, 32<<10) // server → client, until the trigger
	for {
		n, err := s.Read(buf)
		if !lost.Load() {
			if _, werr := c.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			c.Close()
			return
		}
	}
}

func (p *lossyProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestHoldWhoseAnswerIsLost: the database commits a hold, and the answer is
// lost with the connection. Hold reports the store unavailable and the
// gateway refuses the call, so nothing will settle or release that hold:
// its replica must not renew it. Its lease runs out and a sweep releases
// it, uncharged, while the replica's other holds stay renewed.
func TestHoldWhoseAnswerIsLost(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	const lease = time.Second
	other := openStore(t, dsn, Options{Owner: "other", Lease: lease, RenewEvery: -1})
	if _, err := other.Credit(ctx, "acme", 10*usd, "c"); err != nil {
		t.Fatal(err)
	}
	p, proxied := lossyDSN(t, dsn, "SELECT relay_hold(")
	s := openStore(t, proxied, Options{Owner: "cut", Lease: lease, RenewEvery: -1})
	holdAnswerLost(t, s, other, p, "lost")

	// A hold this replica's call does own, for contrast.
	if err := s.Hold(ctx, hold("acme", "kept", usd)); err != nil {
		t.Fatal(err)
	}
	renewUntilSwept(t, s, other, "lost")
	if _, err := other.Outcome(ctx, "kept"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the kept hold ended: %v", err)
	}
	if err := s.Release(ctx, "kept", "done"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.RenewLeases(ctx); err != nil || n != 0 {
		t.Fatalf("RenewLeases after the release = %d, %v; want 0", n, err)
	}
	r := audit(t, other, "acme")
	if r.Account.Balance != 10*usd || r.Account.Held != 0 || r.OpenHolds != 0 {
		t.Fatalf("books after the lost hold: %+v", r)
	}
}

// lossyDSN starts a lossyProxy to dsn's server that drops the answers after
// trigger, and returns it with a DSN through it: plain text, and the simple
// protocol, which sends each statement in one message, its text included:
// what the proxy watches for.
func lossyDSN(t *testing.T, dsn, trigger string) (*lossyProxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := newLossyProxy(t, u.Host, trigger)
	u.Host = p.ln.Addr().String()
	q := u.Query()
	q.Set("default_query_exec_mode", "simple_protocol")
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	return p, u.String()
}

// holdAnswerLost has s hold 2 USD of acme as request id, waits until other
// sees the hold committed, owned by "cut", then cuts the proxy's
// connections: Hold, whose answer is lost, must report the store
// unavailable.
func holdAnswerLost(t *testing.T, s, other *Store, p *lossyProxy, id string) {
	t.Helper()
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() { errc <- s.Hold(ctx, hold("acme", id, 2*usd)) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		hs, err := other.OpenHolds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) == 1 && hs[0].RequestID == id && hs[0].Owner == "cut" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hold did not land: %+v", hs)
		}
	}
	p.cut()
	select {
	case err := <-errc:
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Hold whose answer was lost: %v, want ErrUnavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Hold did not return when its connection was cut")
	}
}

// renewUntilSwept has s renew its leases, which must renew exactly one hold
// (not the lost one), and other sweep, until other finds the lost hold
// recovered, uncharged, as "cut"'s.
func renewUntilSwept(t *testing.T, s, other *Store, lost string) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		n, err := s.RenewLeases(ctx)
		if err != nil || n != 1 {
			t.Fatalf("RenewLeases = %d, %v; want the one hold of a call this replica runs", n, err)
		}
		if _, err := other.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if o, err := other.Outcome(ctx, lost); err == nil {
			if o.State != store.OutcomeRecovered || o.Owner != "cut" || o.Charge != 0 {
				t.Fatalf("outcome of the lost hold: %+v", o)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the lost hold was never released: its replica kept renewing it")
		}
	}
}
