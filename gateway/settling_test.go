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
	t.Parallel()
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
