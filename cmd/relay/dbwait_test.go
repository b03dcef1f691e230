package main

import (
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
)

// TestServeWaitsForTheDatabase: relay serve started while its database does
// not answer waits for it, saying so in its log, instead of exiting, and
// serves once the database is there.
func TestServeWaitsForTheDatabase(t *testing.T) {
	proxy := postgresProxy(t)
	dsn := replicaDatabase(t)
	proxy.Cut() // the database is not there yet
	simAddr := freeAddr(t)
	startSim(t, simAddr)

	back := make(chan struct{})
	go func() {
		defer close(back)
		time.Sleep(2 * time.Second)
		proxy.Restore(t)
	}()
	start := time.Now()
	reps := startReplicas(t, 1, replicaOpts{dsn: withDatabase(t, dsn, "", proxy.Addr()), sim: simAddr, lease: 5 * time.Second})
	<-back
	t.Logf("relay serve answered %v after it started; its database 2 s after", time.Since(start).Round(time.Millisecond))
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("relay serve answered %v after it started, before its database did", d)
	}
	if !reps[0].outputHas("the database does not answer yet; waiting for it") {
		t.Fatalf("relay serve did not say it waits for the database:\n%s", tail(reps[0].output(), 3000))
	}
	key := newAccount(t, reps[0].addr, "acme", pricing.Nano(1_000_000_000))
	r := relayCall(0, reps[0].addr, key, `{"model":"modelf-flash","messages":[{"role":"user","content":"hello"}]}`, false, nil)
	if r.status != 200 {
		t.Fatalf("a call once the database is there: %v", r)
	}
	if strings.Contains(reps[0].output(), `"level":"ERROR"`) {
		t.Errorf("errors logged while waiting:\n%s", tail(reps[0].output(), 3000))
	}
}
