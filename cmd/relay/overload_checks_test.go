package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/modelrelay/modelrelay/pricing"
)

// What the overload tests check once a round's load has stopped
// (overload_test.go), and where they read the ledger.

// ledgerReader is where a test reads the ledger.
type ledgerReader interface {
	// held is the open holds (−1: not known) and what the accounts hold.
	held(t *testing.T) (holds int, held int64, err error)
	// charges counts the charge entries per request id, of rids at least.
	charges(t *testing.T, rids []string) (map[string]int, error)
	// openHolds lists open holds, for a failure's message.
	openHolds(t *testing.T) string
}

// pgBooks reads the database itself, straight from the cluster (not
// through a proxy the gateways may be slowed by).
type pgBooks struct {
	dsn  string
	conn *pgxpool.Pool
}

func newPGBooks(t *testing.T, dsn string) *pgBooks {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A pool, not one connection: a read that times out on the starved
	// database closes its connection, and the next read takes another.
	conn, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return &pgBooks{dsn: dsn, conn: conn}
}

func (b *pgBooks) held(*testing.T) (int, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var holds int
	var held int64
	err := b.conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM holds), (SELECT coalesce(sum(held), 0)::bigint FROM accounts)`).Scan(&holds, &held)
	return holds, held, err
}

func (b *pgBooks) charges(_ *testing.T, rids []string) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A join with the ids, not request_id = ANY($1): with a round's
	// 100,000-odd ids and a journal grown over the rounds, the planner
	// may pick a parallel scan testing every row against the whole array,
	// which outlasted the timeout.
	rows, err := b.conn.Query(ctx, `SELECT j.request_id, count(*) FROM journal j JOIN unnest($1::text[]) AS r(id) ON j.request_id = r.id
		WHERE j.kind = 'charge' GROUP BY j.request_id`, rids)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for rows.Next() {
		var rid string
		var n int
		if err := rows.Scan(&rid, &n); err != nil {
			return nil, err
		}
		out[rid] = n
	}
	return out, rows.Err()
}

func (b *pgBooks) openHolds(t *testing.T) string { return openHolds(t, b.dsn) }

// apiBooks reads the ledger through a gateway's admin API: the round's
// accounts, each journal whole (the API shows the last 10,000 entries).
type apiBooks struct {
	addr     string
	accounts []string
}

func (b *apiBooks) held(t *testing.T) (int, int64, error) {
	var held int64
	for _, id := range b.accounts {
		held += account(t, b.addr, id).Held
	}
	return -1, held, nil
}

func (b *apiBooks) charges(t *testing.T, _ []string) (map[string]int, error) {
	out := map[string]int{}
	for _, id := range b.accounts {
		es := journal(t, b.addr, id)
		if len(es) >= 10000 {
			return nil, fmt.Errorf("the journal of %s fills the admin API's 10,000 entries: the round's calls cannot all be seen; give the round more accounts", id)
		}
		for _, e := range es {
			if e.Kind == "charge" {
				out[e.RequestID]++
			}
		}
	}
	return out, nil
}

func (b *apiBooks) openHolds(t *testing.T) string {
	var s strings.Builder
	for _, id := range b.accounts {
		fmt.Fprintf(&s, "%s holds %s USD\n", id, pricing.Nano(account(t, b.addr, id).Held).Fixed())
	}
	return s.String()
}

// bookTimes are when, after the load stopped, every 200 was charged and
// nothing was held (−1: not within overloadAfter).
type bookTimes struct{ charged, held time.Duration }

// checkAfterLoad runs the checks a–e of a round whose load stopped at
// stopped; ok are its calls answered 200, idle waits for the gateways'
// idle measures (watchIdle).
func (o *overloadRun) checkAfterLoad(t *testing.T, results, ok []callResult, stopped time.Time, idleOf func() []idleResult) {
	t.Helper()
	var rids []string
	for _, r := range results {
		if r.rid != "" {
			rids = append(rids, r.rid)
		}
	}
	at := o.waitBooks(t, ok, rids, stopped)
	idle := idleOf()
	o.checkCharged(t, results, ok, rids, at.charged)
	if at.held < 0 {
		holds, held, err := o.books.held(t)
		t.Errorf("b. still held %s after the load: %d holds, %s USD (%v); open holds:\n%s",
			overloadAfter, holds, pricing.Nano(held).Fixed(), err, tail(o.books.openHolds(t), 2000))
	} else {
		t.Logf("b. nothing held %v after the load", at.held.Round(time.Millisecond))
	}
	for i, g := range o.gws {
		o.checkGateway(t, i, g, idle[i])
	}
}

// waitBooks polls the ledger until every call of ok is charged and nothing
// is held, for up to overloadAfter after stopped. On Badger the journals
// are read once nothing is held (every settle is in by then): each read
// costs the gateway what the test measures.
func (o *overloadRun) waitBooks(t *testing.T, ok []callResult, rids []string, stopped time.Time) bookTimes {
	t.Helper()
	at := bookTimes{charged: -1, held: -1}
	deadline := stopped.Add(overloadAfter)
	_, readEarly := o.books.(*pgBooks)
	for {
		if at.held < 0 {
			if holds, held, err := o.books.held(t); err == nil && holds <= 0 && held == 0 {
				at.held = time.Since(stopped)
			}
		}
		if at.charged < 0 && (readEarly || at.held >= 0) {
			if counts, err := o.books.charges(t, rids); err == nil && missing(ok, counts) == 0 {
				at.charged = time.Since(stopped)
			}
		}
		if (at.charged >= 0 && at.held >= 0) || time.Now().After(deadline) {
			return at
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// missing counts the calls of ok without a charge in counts.
func missing(ok []callResult, counts map[string]int) int {
	n := 0
	for _, r := range ok {
		if counts[r.rid] == 0 {
			n++
		}
	}
	return n
}

// checkCharged (a) wants every call answered 200 charged exactly once and
// no other call charged, reading the ledger once more after the wait.
func (o *overloadRun) checkCharged(t *testing.T, results, ok []callResult, rids []string, chargedAt time.Duration) {
	t.Helper()
	counts, err := o.books.charges(t, rids)
	if err != nil {
		t.Errorf("a. reading the journal: %v", err)
		return
	}
	var uncharged, twice, refusedCharged []string
	for _, r := range ok {
		switch n := counts[r.rid]; {
		case n == 0:
			uncharged = append(uncharged, r.rid)
		case n > 1:
			twice = append(twice, fmt.Sprintf("%s×%d", r.rid, n))
		}
	}
	for _, r := range results {
		if r.status != 200 && r.rid != "" && counts[r.rid] > 0 {
			refusedCharged = append(refusedCharged, fmt.Sprintf("%s (%d %s)", r.rid, r.status, r.code))
		}
	}
	if chargedAt >= 0 {
		t.Logf("a. all %d calls answered 200 charged %v after the load", len(ok), chargedAt.Round(time.Millisecond))
	}
	if len(uncharged) > 0 {
		t.Errorf("a. %d of %d calls answered 200 not charged %s after the load, e.g. %s", len(uncharged), len(ok), overloadAfter, examples(uncharged))
	}
	if len(twice) > 0 {
		t.Errorf("a. %d calls answered 200 charged more than once, e.g. %s", len(twice), examples(twice))
	}
	if len(refusedCharged) > 0 {
		t.Errorf("a. %d calls not answered 200 charged, e.g. %s", len(refusedCharged), examples(refusedCharged))
	}
}

func examples(s []string) string {
	if len(s) > 5 {
		return strings.Join(s[:5], ", ") + ", …"
	}
	return strings.Join(s, ", ")
}

// idleResult is when a gateway fell under idleBelow after the load (−1:
// not within overloadAfter), and its CPU share in each window until then.
type idleResult struct {
	at     time.Duration
	shares []string
	err    error
}

// waitIdle measures process pid's CPU over windows of idleWindow from
// stopped until one is under idleBelow of a CPU, or overloadAfter has
// passed.
func waitIdle(pid int, stopped time.Time) idleResult {
	r := idleResult{at: -1}
	for time.Since(stopped)+idleWindow <= overloadAfter {
		c0, err := cpuTime(pid)
		t0 := time.Now()
		time.Sleep(idleWindow)
		c1, err1 := cpuTime(pid)
		if err != nil || err1 != nil {
			r.err = fmt.Errorf("%v %v", err, err1)
			return r
		}
		share := float64(c1-c0) / float64(time.Since(t0))
		r.shares = append(r.shares, fmt.Sprintf("%.0f%%", 100*share))
		if share < idleBelow {
			r.at = time.Since(stopped)
			return r
		}
	}
	return r
}

// checkGateway runs the checks of one gateway: (c) idle, (d) its log, (e)
// relay_calls_uncharged_total, and logs its store metrics.
func (o *overloadRun) checkGateway(t *testing.T, i int, g *gatewayProc, idle idleResult) {
	t.Helper()
	name := fmt.Sprintf("gateway %d (%s)", i, g.addr)
	switch {
	case idle.err != nil:
		t.Errorf("c. %s: reading its CPU time: %v", name, idle.err)
	case idle.at < 0:
		t.Errorf("c. %s not idle (under %.0f%% of a CPU over %v) within %v after the load: CPU per window %v",
			name, 100*idleBelow, idleWindow, overloadAfter, idle.shares)
	default:
		t.Logf("c. %s idle %v after the load (CPU per window %v)", name, idle.at.Round(time.Millisecond), idle.shares)
	}
	ls := readLog(g.output())
	t.Logf("d. %s log: %d bytes, %d without the access lines; %d WARN, %d ERROR lines: %s%s", name, ls.total, ls.noAccess, ls.warns, ls.errors, ls.top, ls.errs)
	if ls.noAccess > logBound {
		t.Errorf("d. %s logged %d bytes besides its access lines, over %d", name, ls.noAccess, logBound)
	}
	if i < len(o.peaks) {
		p := o.peaks[i]
		t.Logf("e. %s during the load: relay_store_backlog peak %v writes, relay_store_backlog_age_seconds peak %v s; peak resident memory %s",
			name, p.backlog, p.age, vmHWM(g.cmd.Process.Pid))
	}
	page := metricsPage(t, g.addr)
	t.Logf("e. %s metrics: relay_calls_uncharged_total %s, relay_store_retries_total %s, relay_store_behind_refused_total %s, relay_store_backlog %s",
		name, metricText(page, "relay_calls_uncharged_total"), metricText(page, "relay_store_retries_total"),
		metricText(page, "relay_store_behind_refused_total"), metricText(page, "relay_store_backlog"))
	switch v, found := metricSum(page, "relay_calls_uncharged_total"); {
	case !found:
		t.Errorf("e. %s: metric relay_calls_uncharged_total missing", name)
	case v != 0:
		t.Errorf("e. %s: relay_calls_uncharged_total is %v, want 0", name, v)
	}
}

// checkPinned wants every process of the server side on the server's CPU.
func (o *overloadRun) checkPinned(t *testing.T) {
	t.Helper()
	n := 0
	if o.pg != nil {
		n += checkPinned(t, "PostgreSQL", o.pg.postmaster(t), o.cpu.server)
	}
	for _, g := range o.gws {
		n += checkPinned(t, "relay serve", g.cmd.Process.Pid, o.cpu.server)
	}
	n += checkPinned(t, "relay sim", o.sim.cmd.Process.Pid, o.cpu.server)
	t.Logf("%d processes of the server side, all on CPU %d", n, o.cpu.server)
}
