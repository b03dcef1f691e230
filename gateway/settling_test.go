package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/admin"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/wire"
)

func TestSettlingWait(t *testing.T) {
	s := newSettling()
	ctx := context.Background()
	s.wait(ctx, "acme") // nothing pending: returns at once

	waitIn := func() chan struct{} {
		done := make(chan struct{})
		go func() { s.wait(ctx, "acme"); close(done) }()
		return done
	}
	sealed := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.m["acme"].open == nil
	}
	still := func(done chan struct{}, what string) {
		t.Helper()
		select {
		case <-done:
			t.Fatalf("%s returned with a call it covers still settling", what)
		case <-time.After(20 * time.Millisecond):
		}
	}

	a := s.begin("acme")
	b := s.begin("acme")
	other := s.begin("zeta")
	first := waitIn()
	for !sealed() {
		time.Sleep(time.Millisecond)
	}
	// A call that begins after the first wait does not prolong it, but a
	// second wait covers it and the first wait's calls too.
	late := s.begin("acme")
	if late == a {
		t.Fatal("a call after a wait joined the sealed group")
	}
	second := waitIn()
	for !sealed() {
		time.Sleep(time.Millisecond)
	}
	s.end("acme", a)
	still(first, "the first wait")
	s.end("acme", b)
	<-first
	still(second, "the second wait")
	s.end("acme", late)
	<-second
	s.end("zeta", other)
	if len(s.m) != 0 {
		t.Fatalf("groups left after every call ended: %v", s.m)
	}

	// A cancelled context ends the wait.
	p := s.begin("acme")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	s.wait(cctx, "acme")
	s.end("acme", p)
}

// gatedSettle holds every Settle until the test opens the gate.
type gatedSettle struct {
	Store
	started chan string
	gate    chan struct{}
}

func (g gatedSettle) Settle(ctx context.Context, s store.Settlement) (store.Entry, error) {
	g.started <- s.RequestID
	<-g.gate
	return g.Store.Settle(ctx, s)
}

// A JSON answer reaches the client before its call is settled, and an admin
// read of the account made after the answer waits for the settle: it shows
// the charge, not the hold.
func TestAnswerBeforeSettleAdminReadsWait(t *testing.T) {
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "economy")
	gs := gatedSettle{Store: e.store, started: make(chan string, 1), gate: make(chan struct{})}
	gw, err := New(Options{Config: e.cfg, Store: gs, Plugins: e.host, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	defer func() { _ = gw.Drain(context.Background()) }()
	open := func() {
		select {
		case <-gs.gate:
		default:
			close(gs.gate)
		}
	}
	defer open() // first: a failed test must not leave a handler blocked

	req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(chatBody("modelf-flash", "hello")))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
	// The whole answer is here and the settle has not ended.
	<-gs.started
	if a, _ := e.store.Balance(context.Background(), "acme"); a.Held == 0 {
		t.Fatalf("the hold is gone before the settle was let through: %+v", a)
	}
	u, ok, err := wire.ChatUsage(data)
	if err != nil || !ok {
		t.Fatalf("usage: %v %v", ok, err)
	}
	want := expectedCharge(t, e, "modelf-flash", "economy", u)

	got := make(chan admin.AccountView, 1)
	go func() {
		r, _ := http.NewRequest("GET", srv.URL+"/admin/accounts/acme", nil)
		r.Header.Set("Authorization", "Bearer "+testAdminToken)
		// Another connection: the call's own stays busy until its handler
		// returns.
		c := &http.Client{Transport: &http.Transport{}}
		resp, err := c.Do(r)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		defer resp.Body.Close()
		var v admin.AccountView
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Error(err)
		}
		got <- v
	}()
	select {
	case v := <-got:
		t.Fatalf("the balance read did not wait for the settle: %+v", v)
	case <-time.After(50 * time.Millisecond):
	}
	open()
	v := <-got
	if v.BalanceNano != int64(5*pricing.NanoPerUSD-want) || v.HeldNano != 0 {
		t.Fatalf("balance read after the answer: %+v, want %s charged and nothing held", v, want.Fixed())
	}
}
