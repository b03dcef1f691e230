package main

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/internal/cutproxy"
	"github.com/modelrelay/modelrelay/pricing"
)

// The overload tests: `relay serve` and everything it needs — the sim, the
// database — pinned to one CPU (taskset), and 64 callers, half of them
// streaming, each calling again as soon as its call ends, for 15 s, on
// another CPU. A gateway that cannot keep up may refuse calls (503 with
// Retry-After, or 429), but what it answers must stay true, and the
// overload must end when the load does. After each round, within 30 s of
// the load's end:
//
//	a. every call answered 200 is charged exactly once, and no other call is;
//	b. nothing is held (allotments go after 10 s idle);
//	c. each gateway is idle: under 20% of one CPU over 2 s;
//	d. each gateway's log, but for its access lines, is under 1 MB;
//	e. relay_calls_uncharged_total is 0 on each gateway.
//
// They take minutes: RELAY_TEST_OVERLOAD=1 runs them (make test-overload),
// RELAY_TEST_OVERLOAD_ROUNDS and RELAY_TEST_OVERLOAD_LOAD shorten them.

const (
	overloadCallers = 64
	overloadAfter   = 30 * time.Second // how long the checks wait after the load
	idleBelow       = 0.20             // of one CPU, over idleWindow
	idleWindow      = 2 * time.Second
	logBound        = 1 << 20 // bytes of log, access lines aside
	overloadCredit  = pricing.Nano(100_000_000_000_000)
)

const overloadBody = `{"model":"modelf-flash","messages":[{"role":"user","content":"hello"}]}`

// One gateway on PostgreSQL, five rounds against the same processes.
func TestOverloadPostgres(t *testing.T) {
	needOverload(t)
	o := startPostgresOverload(t, 1, nil)
	for i := range overloadRounds(t, 5) {
		o.runRound(t, i+1, nil)
	}
}

// One gateway on PostgreSQL through a proxy that adds 2 ms each way, and
// stops forwarding for 5 s from 5 s into the load (holding what is sent,
// as a database that stalls).
func TestOverloadPostgresSlowDatabase(t *testing.T) {
	needOverload(t)
	var proxy *cutproxy.Proxy
	o := startPostgresOverload(t, 1, func(target string) string {
		proxy = cutproxy.Start(t, target)
		proxy.SetDelay(2 * time.Millisecond)
		t.Logf("the gateway reaches the database through a proxy adding 2 ms each way, at %s", proxy.Addr())
		return proxy.Addr()
	})
	o.runRound(t, 1, func(t *testing.T, load time.Duration) {
		time.Sleep(load / 3)
		proxy.Pause()
		t.Logf("the proxy pauses %v into the load", load/3)
		time.Sleep(load / 3)
		proxy.Resume()
		t.Logf("the proxy resumes %v into the load", 2*load/3)
	})
}

// Three gateways on one PostgreSQL database, callers round-robin.
func TestOverloadThreeReplicas(t *testing.T) {
	needOverload(t)
	startPostgresOverload(t, 3, nil).runRound(t, 1, nil)
}

// One gateway on Badger with sync_writes, five rounds. Its journal is read
// through the admin API, which shows an account's last 10,000 entries and
// has no paging: each round's calls go to accounts of their own, eight of
// them, so that each journal holds all its round's calls.
func TestOverloadBadger(t *testing.T) {
	needOverload(t)
	c := pinTestProcess(t)
	simAddr := freeAddr(t)
	sim := startSimCmd(t, pinned(c.server, relayBin, "sim", "-addr", simAddr), simAddr)
	g := startOverloadGateway(t, overloadGateway{sim: simAddr, cpu: c.server})
	o := &overloadRun{cpu: c, gws: []*gatewayProc{g}, sim: sim}
	rounds := overloadRounds(t, 5)
	accounts := make([][]string, rounds)
	keys := make([][]string, rounds)
	for r := range rounds {
		for a := range 8 {
			id := fmt.Sprintf("round%d-%d", r+1, a)
			accounts[r] = append(accounts[r], id)
			keys[r] = append(keys[r], newAccount(t, g.addr, id, overloadCredit))
		}
	}
	for r := range rounds {
		o.keys, o.books = keys[r], &apiBooks{addr: g.addr, accounts: accounts[r]}
		o.runRound(t, r+1, nil)
	}
}

// overloadRun is the server side of an overload test and what a round's
// callers call it with.
type overloadRun struct {
	cpu   cpus
	pg    *pgCluster // nil on Badger
	sim   *simProc
	gws   []*gatewayProc
	keys  []string // caller w uses keys[w/2 % len(keys)]
	books ledgerReader
	peaks []peak // of the last round's load, per gateway
}

// startPostgresOverload starts the test's own PostgreSQL cluster, the sim
// and n gateways on one database, all pinned to the server's CPU, and an
// account with ample credit. With via, the gateways reach the database at
// the address via returns for the cluster's.
func startPostgresOverload(t *testing.T, n int, via func(target string) string) *overloadRun {
	t.Helper()
	c := pinTestProcess(t)
	pg, dsn := startPostgres(t, c.server)
	simAddr := freeAddr(t)
	o := &overloadRun{cpu: c, pg: pg, sim: startSimCmd(t, pinned(c.server, relayBin, "sim", "-addr", simAddr), simAddr)}
	gwDSN := dsn
	if via != nil {
		gwDSN = strings.Replace(dsn, pg.hostport(), via(pg.hostport()), 1)
	}
	for range n {
		o.gws = append(o.gws, startOverloadGateway(t, overloadGateway{dsn: gwDSN, sim: simAddr, cpu: c.server}))
	}
	o.keys = []string{newAccount(t, o.gws[0].addr, "acme", overloadCredit)}
	o.books = newPGBooks(t, dsn)
	t.Logf("PostgreSQL %s, the sim and %d gateway(s) on CPU %d; the callers on CPU %d", pg.bin, n, c.server, c.load)
	return o
}

// runRound runs round i as a subtest: the load, with during (if set)
// beside it, then the checks. The load stops when its callers stop
// calling; the checks' 30 s count from then, not from the last answer (a
// call kept waiting is part of the failure).
func (o *overloadRun) runRound(t *testing.T, i int, during func(t *testing.T, load time.Duration)) {
	t.Run(fmt.Sprintf("round%d", i), func(t *testing.T) {
		load := overloadLoadFor(t)
		start := time.Now()
		stopped := start.Add(load)
		var beside sync.WaitGroup
		defer beside.Wait()
		if during != nil {
			beside.Go(func() { during(t, load) })
		}
		idle := o.watchIdle(stopped)
		peaks := o.watchPeaks(stopped)
		results := o.load(stopped, overloadCallersFor(t))
		o.peaks = peaks()
		ok := checkAnswers(t, results, load, time.Since(stopped))
		o.checkAfterLoad(t, results, ok, stopped, idle)
		if i == 1 {
			o.checkPinned(t)
		}
	})
	for _, g := range o.gws {
		if resp, err := http.Get("http://" + g.addr + "/healthz"); err != nil {
			t.Fatalf("relay serve %s does not answer after round %d: %v", g.addr, i, err)
		} else {
			resp.Body.Close()
		}
	}
}

// load runs the callers until end: caller w calls gateway w % len(gws),
// with a stream when w is odd, again as soon as each call ends.
func (o *overloadRun) load(end time.Time, callers int) []callResult {
	var (
		mu  sync.Mutex
		all []callResult
		wg  sync.WaitGroup
	)
	for w := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i, key := w%len(o.gws), o.keys[w/2%len(o.keys)]
			var mine []callResult
			for time.Now().Before(end) {
				r := relayCall(i, o.gws[i].addr, key, overloadBody, w%2 == 1, nil)
				if w%2 == 1 && r.status == 200 && !r.done && r.err == nil {
					r.err = errors.New("a stream answered 200 ended without data: [DONE]")
				}
				mine = append(mine, r)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all
}

// watchIdle measures each gateway's CPU from stopped on (waitIdle), beside
// the rest; the function returned waits for the results.
func (o *overloadRun) watchIdle(stopped time.Time) func() []idleResult {
	idle := make([]idleResult, len(o.gws))
	var wg sync.WaitGroup
	for i, g := range o.gws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(stopped))
			idle[i] = waitIdle(g.cmd.Process.Pid, stopped)
		}()
	}
	return func() []idleResult { wg.Wait(); return idle }
}

// checkAnswers wants every call answered, a 200 whole (a stream to its
// [DONE]), and any other answer in the error shape and a 503 with
// Retry-After or a 429; it logs the calls by status, the 503s and 429s by
// code, the latencies of the 200s and how long after the load stopped the
// last call was answered (late), and returns the 200s.
func checkAnswers(t *testing.T, results []callResult, load, late time.Duration) []callResult {
	t.Helper()
	var ok []callResult
	statuses, codes, wrong := map[string]int{}, map[string]int{}, map[string]int{}
	var lat []time.Duration
	for _, r := range results {
		statuses[fmt.Sprint(r.status)]++
		switch {
		case r.err != nil && r.status == 0:
			wrong[fmt.Sprintf("no answer: %v", r.err)]++
		case r.err != nil:
			wrong[fmt.Sprintf("%d: %v", r.status, r.err)]++
		case r.status == 200 && r.rid == "":
			wrong["200 without X-Request-Id"]++
		case r.status == 200:
			ok = append(ok, r)
			lat = append(lat, r.latency())
		case r.status == 503 && r.retryAfter != "", r.status == 429:
			codes[fmt.Sprintf("%d %s", r.status, r.code)]++
		default:
			wrong[fmt.Sprintf("%d %s/%s Retry-After %q: %.100q", r.status, r.typ, r.code, r.retryAfter, r.message)]++
		}
	}
	slices.Sort(lat)
	pct := func(p int) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[(len(lat)-1)*p/100].Round(time.Millisecond)
	}
	t.Logf("%d calls in %v (%.0f/s), the last answered %v after: by status %v; refusals by code %v; 200s p50 %v p99 %v max %v",
		len(results), load, float64(len(results))/load.Seconds(), late.Round(time.Millisecond), statuses, codes, pct(50), pct(99), pct(100))
	if len(wrong) > 0 {
		n := 0
		for _, c := range wrong {
			n += c
		}
		t.Errorf("%d calls answered neither 200 nor 503 with Retry-After nor 429, in the error shape: %s", n, topCounts(wrong, 6))
	}
	if len(ok) == 0 {
		t.Errorf("no call answered 200 in %v", load)
	}
	return ok
}
