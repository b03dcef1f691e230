package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/internal/testwait"
	"github.com/modelrelay/modelrelay/store"
)

// downSettles is a store whose Settle reports the database unavailable
// while down is set, as a PostgreSQL store does when it cannot be reached.
type downSettles struct {
	Store
	down  *atomic.Bool
	tries *atomic.Int64
}

func (d downSettles) Settle(ctx context.Context, s store.Settlement) (store.Entry, error) {
	d.tries.Add(1)
	if d.down.Load() {
		return store.Entry{}, fmt.Errorf("settle %q: %w", s.RequestID, store.ErrUnavailable)
	}
	return d.Store.Settle(ctx, s)
}

// A JSON answer and a stream whose settle meets an unavailable store end
// for the client at once — the stream's body ends, and the connection
// serves the caller's next request — instead of waiting for the database;
// their settles go on in the background and charge each call once the
// store answers again, and the drain waits for them.
func TestSettleWhileStoreUnavailable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "economy")
	var down atomic.Bool
	var tries atomic.Int64
	down.Store(true)
	gw, err := New(Options{Config: e.cfg, Store: downSettles{Store: e.store, down: &down, tries: &tries}, Plugins: e.host, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	defer down.Store(false) // first: a failed test must not leave settles retrying

	// One connection for every call: each must be answered whole while the
	// settles before it are still waiting for the store.
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}, Timeout: 20 * time.Second}
	call := func(stream bool) string { return callWhileStoreDown(t, client, srv.URL, key, stream) }
	rids := []string{call(false), call(true), call(false), call(true)}
	if a, _ := e.store.Balance(context.Background(), "acme"); a.Held == 0 || a.Balance != 5_000_000_000 {
		t.Fatalf("while the store is unavailable the calls stay held, uncharged: %+v", a)
	}
	if !testwait.Holds(10*time.Second, func() bool { return tries.Load() >= int64(2*len(rids)) }) {
		t.Fatalf("%d settle tries for %d calls: the settles are not retried", tries.Load(), len(rids))
	}

	down.Store(false)
	drained := make(chan error, 1)
	go func() { drained <- gw.Drain(context.Background()) }()
	select {
	case err := <-drained:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the drain did not end once the store answered")
	}
	checkEachChargedOnce(t, e, rids)
}

// callWhileStoreDown makes a chat call (a stream when stream) and wants it
// answered whole and promptly, not after its settle; it returns the
// call's request id.
func callWhileStoreDown(t *testing.T, client *http.Client, url, key string, stream bool) string {
	t.Helper()
	body := chatBody("modelf-flash", "the ledger is away")
	if stream {
		body = chatBody("modelf-flash", "the ledger is away", `"stream":true`)
	}
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("call while the store is unavailable: %v", err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || (stream && !strings.Contains(string(data), "data: [DONE]")) {
		t.Fatalf("call while the store is unavailable: %d %v %.300s", resp.StatusCode, err, data)
	}
	// The settle retries for up to 5 minutes: an answer that waited for
	// it would take 20 s here (the client's timeout).
	if d := time.Since(t0); d > 10*time.Second {
		t.Fatalf("the answer took %s: it waited for the settle", d)
	}
	return resp.Header.Get("X-Request-Id")
}

// checkEachChargedOnce wants nothing held on acme, each call of rids
// charged once and no other, and the balance 5 USD less the charges.
func checkEachChargedOnce(t *testing.T, e *env, rids []string) {
	t.Helper()
	a, err := e.store.Balance(context.Background(), "acme")
	if err != nil || a.Held != 0 {
		t.Fatalf("after the drain: %+v %v", a, err)
	}
	es, err := e.store.Charges(context.Background(), "acme", 100)
	if err != nil {
		t.Fatal(err)
	}
	charged := map[string]int{}
	var sum int64
	for _, en := range es {
		if en.Kind == store.KindCharge {
			charged[en.RequestID]++
			sum += int64(-en.Amount)
		}
	}
	for _, rid := range rids {
		if charged[rid] != 1 {
			t.Errorf("call %s charged %d times once the store answered", rid, charged[rid])
		}
	}
	if len(charged) != len(rids) || int64(a.Balance) != 5_000_000_000-sum {
		t.Errorf("charges %v; balance %d, want 5 USD − %d", charged, a.Balance, sum)
	}
}
