package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/internal/cutproxy"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store/postgres/pgtest"
)

// These tests run N `relay serve` processes on one PostgreSQL database, as
// a deployment does. They need a server they may create databases on:
// RELAY_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test. Each test
// makes its own database and drops it at the end.

// needPostgres returns RELAY_TEST_POSTGRES, or skips t.
func needPostgres(t *testing.T) string { return pgtest.Need(t) }

// replicaDatabase creates an empty database relay_replicas_<hex> and
// returns its URL; it is dropped, connections and all, when t ends.
func replicaDatabase(t *testing.T) string { return pgtest.Database(t, "relay_replicas") }

// withDatabase is the URL dsn with database db and, if hostport is set,
// that host and port.
func withDatabase(t *testing.T, dsn, db, hostport string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		t.Fatalf("RELAY_TEST_POSTGRES must be a postgres:// URL: %q", dsn)
	}
	if db != "" {
		u.Path = "/" + db
	}
	if hostport != "" {
		u.Host = hostport
	}
	return u.String()
}

// postgresProxy starts a cutproxy to the test server: the database as the
// replicas that connect through it see it, to stop and start again.
func postgresProxy(t *testing.T) *cutproxy.Proxy {
	t.Helper()
	u, _ := url.Parse(needPostgres(t))
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	return cutproxy.Start(t, target)
}

// replicaOpts are what the tests vary in a replica's configuration.
type replicaOpts struct {
	dsn     string
	sim     string        // the sim's address
	lease   time.Duration // store.lease
	outputs int           // billing.default_output_tokens; 0 = the default
}

// startReplicas starts n `relay serve` processes on one database, each with
// its own data directory, and waits until each answers /healthz (it has
// opened the store and migrated it by then).
func startReplicas(t *testing.T, n int, o replicaOpts) []*gatewayProc {
	t.Helper()
	cache := wasmCache(t.TempDir())
	billing := ""
	if o.outputs > 0 {
		billing = fmt.Sprintf("billing: {default_output_tokens: %d}\n", o.outputs)
	}
	reps := make([]*gatewayProc, n)
	for i := range reps {
		dir := t.TempDir()
		addr := freeAddr(t)
		cfg := fmt.Sprintf(`listen: %s
data_dir: %s
support_email: ops@relay.test
admin_token: %s
plugins: {dir: %s, cache_dir: %s, poll: -1s}
limits:
  key_rate: {rate: 100000, burst: 100000}
  overload_delay: -1s   # the box runs other tests: measure the ledger, not the shedder
store:
  driver: postgres
  dsn: %q
  max_conns: 8
  lease: %s
%sroutes: [{name: standard}, {name: economy}]
lines:
  - {name: std, protocol: openai, base_url: "http://%s", models: ["*"], route: standard}
  - {name: eco, protocol: openai, base_url: "http://%s", models: ["*"], route: economy}
`, addr, filepath.Join(dir, "data"), adminToken, pluginDir, cache, o.dsn, o.lease, billing, o.sim, o.sim)
		config := filepath.Join(dir, "relay.yaml")
		if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		reps[i] = startGateway(t, config, addr)
		logIfFailed(t, fmt.Sprintf("replica %d (%s)", i, addr), reps[i])
	}
	return reps
}

// replicaClient sends the tests' calls: enough connections for 500 callers.
var replicaClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}, Timeout: 60 * time.Second}

// callResult is one call as its caller saw it.
type callResult struct {
	replica     int
	status      int
	rid         string
	typ, code   string
	message     string
	retryAfter  string
	shouldRetry string
	done        bool // a stream carried data: [DONE]
	err         error
	start, end  time.Time
}

func (r callResult) latency() time.Duration { return r.end.Sub(r.start) }

func (r callResult) String() string {
	return fmt.Sprintf("replica %d: %d %s/%s rid %s err %v (%s)", r.replica, r.status, r.typ, r.code, r.rid, r.err, r.latency().Round(time.Millisecond))
}

// relayCall makes a chat call of body (a stream when stream) to replica i
// at addr. For a stream, started (if set) receives once the first line of
// the answer has arrived, or once the call has ended without one.
func relayCall(i int, addr, key, body string, stream bool, started chan<- struct{}) callResult {
	r := callResult{replica: i, start: time.Now()}
	signalled := false
	signal := func() {
		if started != nil && !signalled {
			signalled = true
			started <- struct{}{}
		}
	}
	defer signal()
	if stream {
		body = strings.TrimSuffix(body, "}") + `,"stream":true}`
	}
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := replicaClient.Do(req)
	if err != nil {
		r.err, r.end = err, time.Now()
		return r
	}
	defer resp.Body.Close()
	r.status, r.rid = resp.StatusCode, resp.Header.Get("X-Request-Id")
	r.retryAfter, r.shouldRetry = resp.Header.Get("Retry-After"), resp.Header.Get("X-Should-Retry")
	rd := bufio.NewReader(resp.Body)
	var data []byte
	if stream && r.status == 200 {
		line, err := rd.ReadBytes('\n')
		data = line
		signal()
		if err != nil {
			r.err, r.end = err, time.Now()
			return r
		}
	}
	rest, err := io.ReadAll(rd)
	r.end = time.Now()
	data = append(data, rest...)
	r.err = err
	if r.status == 200 {
		r.done = strings.Contains(string(data), "data: [DONE]")
		return r
	}
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	if jerr := json.Unmarshal(data, &e); jerr != nil && r.err == nil {
		r.err = fmt.Errorf("the %d answer is not the error shape (docs/api.md#errors): %v: %.200q", r.status, jerr, data)
	}
	r.typ, r.code, r.message = e.Error.Type, fmt.Sprint(e.Error.Code), e.Error.Message
	return r
}

// entry is a journal entry as GET /admin/accounts/{id}/charges shows it.
type entry struct {
	Seq       uint64       `json:"seq"`
	Kind      string       `json:"kind"`
	RequestID string       `json:"request_id"`
	Endpoint  string       `json:"endpoint"`
	Hold      pricing.Nano `json:"hold_usd"`
	Amount    pricing.Nano `json:"amount_usd"`
	Time      time.Time    `json:"time"`
	Note      string       `json:"note"`
}

// accountState is GET /admin/accounts/{id}.
type accountState struct {
	Balance int64 `json:"balance_nano"`
	Held    int64 `json:"held_nano"`
}

func journal(t *testing.T, addr, account string) []entry {
	t.Helper()
	var out struct{ Data []entry }
	adminGet(t, addr, "/admin/accounts/"+account+"/charges?limit=10000", &out)
	return out.Data
}

func account(t *testing.T, addr, id string) accountState {
	t.Helper()
	var a accountState
	adminGet(t, addr, "/admin/accounts/"+id, &a)
	return a
}

// waitHeldZero waits until the account has no open hold and returns it.
// Replicas settle after the answer, and the admin reads of one replica wait
// only for its own settles: another's may still be on their way.
func waitHeldZero(t *testing.T, addr, id string, within time.Duration, dsn string) accountState {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		a := account(t, addr, id)
		if a.Held == 0 {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("account %s still holds %s USD after %s; open holds:\n%s", id, pricing.Nano(a.Held).Fixed(), within, openHolds(t, dsn))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// openHolds lists the open holds in the database at dsn, for a failure's
// message.
func openHolds(t *testing.T, dsn string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err.Error()
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT request_id, owner, amount, created, lease_until, now() FROM holds ORDER BY created`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var (
			rid, owner        string
			amount            int64
			created, lu, now0 time.Time
		)
		if err := rows.Scan(&rid, &owner, &amount, &created, &lu, &now0); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "%s owner %s amount %d created %s lease until %s (now %s)\n", rid, owner, amount,
			created.Format(time.RFC3339Nano), lu.Format(time.RFC3339Nano), now0.Format(time.RFC3339Nano))
	}
	return b.String()
}

// checkBooks checks what holds of every journal: the account's balance is the
// sum of its entries (credits − charges; a recovery moves nothing), to the
// nano-USD, and nothing is held. It returns the credits and the charges.
func checkBooks(t *testing.T, entries []entry, a accountState) (credits, charges int64) {
	t.Helper()
	var sum int64
	for _, e := range entries {
		sum += int64(e.Amount)
		switch e.Kind {
		case "credit":
			credits += int64(e.Amount)
		case "charge":
			charges -= int64(e.Amount)
		case "recovery":
			if e.Amount != 0 {
				t.Errorf("recovery entry %d of %s moved %s USD: a recovery is never charged", e.Seq, e.RequestID, e.Amount.Fixed())
			}
		default:
			t.Errorf("unexpected journal entry %+v", e)
		}
	}
	if sum != a.Balance || credits-a.Balance != charges {
		t.Errorf("the books do not balance: balance %d nano-USD, Σ journal %d, credits %d − balance = %d, Σ charges %d",
			a.Balance, sum, credits, credits-a.Balance, charges)
	}
	if a.Held != 0 {
		t.Errorf("held %d nano-USD, want 0", a.Held)
	}
	return credits, charges
}

// newAccount creates account id with credit (nano-USD) through the admin
// CLI against addr and returns a key for the economy route.
func newAccount(t *testing.T, addr, id string, credit pricing.Nano) string {
	t.Helper()
	if out, errOut, code := cli(t, addr, "accounts", "create", "-account", id); code != 0 {
		t.Fatalf("accounts create: %s %s", out, errOut)
	}
	if out, errOut, code := cli(t, addr, "accounts", "credit", "-account", id, "-usd", credit.Fixed()); code != 0 {
		t.Fatalf("accounts credit: %s %s", out, errOut)
	}
	key, errOut, code := cli(t, addr, "keys", "create", "-account", id, "-route", "economy")
	if code != 0 {
		t.Fatalf("keys create: %s", errOut)
	}
	return strings.TrimSpace(key)
}

// scarceBody is the call of TestReplicasShareScarceCredit. It names no
// max_tokens, so its hold is priced for billing.default_output_tokens (16
// there); the sim writes 24 words, so every call overruns its hold.
const scarceBody = `{"model":"modelf-flash","messages":[{"role":"user","content":"scarce credit"}]}`

// Three replicas on one database and 500 concurrent calls, round-robin,
// against credit for ten holds. Every call has the same hold H and charge
// C > H (each overruns by C − H). What can be asserted exactly:
//
//   - A hold is admitted only when balance − held ≥ H. With no release
//     (every admitted call succeeds), each settle lowers balance − held by
//     C − H ≥ 0, so the N-th admission needs credit ≥ N·H + (C−H)·settled:
//     at most N = ⌊credit / H⌋ calls are admitted, and the charges exceed
//     the credit by at most N·(C − H), the overruns of calls that may all
//     have been in flight together (store/doc.go, the overrun bound).
//   - A refusal means balance ≤ 0 or balance − held < H, so credit <
//     H + N·C: at least ⌊(credit − H) / C⌋ + 1 calls are admitted.
//   - Every other call is 402 insufficient_credit in the error shape (docs/api.md#errors) and
//     charged nothing; every admitted call is charged exactly once; the
//     journal sums to credits − balance to the nano-USD, and nothing stays
//     held.
func TestReplicasShareScarceCredit(t *testing.T) {
	needPostgres(t)
	dsn := replicaDatabase(t)
	simAddr := freeAddr(t)
	startSim(t, simAddr, "-latency", "20ms") // admitted calls overlap
	reps := startReplicas(t, 3, replicaOpts{dsn: dsn, sim: simAddr, lease: 30 * time.Second, outputs: 16})

	p := probeHoldAndCharge(t, reps, dsn)
	H, C := p.hold, p.charge
	credit := 10*H + H/2
	maxAdmitted := credit / H           // 10
	minAdmitted := (credit-H)/C + 1     // what a refusal implies
	maxOverrun := maxAdmitted * (C - H) // the overrun bound
	key := newAccount(t, reps[0].addr, "acme", pricing.Nano(credit))
	t.Logf("hold %d, charge %d nano-USD (overrun %d); credit %d: between %d and %d calls can be admitted",
		H, C, C-H, credit, minAdmitted, maxAdmitted)

	const calls = 500
	start := time.Now()
	out := callAtOnce(reps, key, calls)
	elapsed := time.Since(start)
	admitted, refused, perReplica := sortScarceCalls(t, out, len(reps))
	n := int64(len(admitted))
	t.Logf("%d calls in %v: %d admitted (per replica %v), %d refused 402",
		calls, elapsed.Round(time.Millisecond), n, perReplica, len(refused))
	if n > maxAdmitted || n < minAdmitted {
		t.Errorf("%d calls admitted; credit %d with hold %d and charge %d admits between %d and %d", n, credit, H, C, minAdmitted, maxAdmitted)
	}

	a := waitHeldZero(t, reps[1].addr, "acme", 20*time.Second, dsn)
	entries := journal(t, reps[2].addr, "acme")
	credits, charges := checkBooks(t, entries, a)
	checkChargedOnce(t, entries, p, admitted, refused)
	if credits != credit {
		t.Errorf("credits %d, want %d", credits, credit)
	}
	if over := charges - credits; over > maxOverrun || over > n*(C-H) {
		t.Errorf("the charges exceed the credit by %d nano-USD; the overrun bound of %d admitted calls is %d", over, n, n*(C-H))
	}
	t.Logf("credits %d − balance %d = Σ charges %d nano-USD (%d calls × %d); balance below zero by %d, bound %d",
		credits, a.Balance, charges, n, C, max(0, -a.Balance), n*(C-H))
}

// holdAndCharge is what one call of scarceBody holds and is charged, in nano-USD.
type holdAndCharge struct{ hold, charge int64 }

// probeHoldAndCharge measures the hold and the charge of a call through
// the replicas themselves, on a probe account: the call on one replica,
// the journal read on another. The test needs a charge above the hold (an
// overrun).
func probeHoldAndCharge(t *testing.T, reps []*gatewayProc, dsn string) holdAndCharge {
	t.Helper()
	probeKey := newAccount(t, reps[0].addr, "probe", pricing.Nano(1_000_000_000))
	if r := relayCall(1, reps[1].addr, probeKey, scarceBody, false, nil); r.status != 200 || r.err != nil {
		t.Fatalf("probe call: %v", r)
	}
	waitHeldZero(t, reps[2].addr, "probe", 10*time.Second, dsn)
	var p holdAndCharge
	for _, e := range journal(t, reps[2].addr, "probe") {
		if e.Kind == "charge" {
			p = holdAndCharge{int64(e.Hold), -int64(e.Amount)}
		}
	}
	if p.hold <= 0 || p.charge <= p.hold {
		t.Fatalf("the probe call: hold %d, charge %d nano-USD; the test needs a charge above the hold (an overrun)", p.hold, p.charge)
	}
	return p
}

// callAtOnce makes n calls of scarceBody with key, call i on replica i%3,
// all let go at the same moment, and returns them once all have ended.
func callAtOnce(reps []*gatewayProc, key string, n int) []callResult {
	out := make([]callResult, n)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			out[i] = relayCall(i%3, reps[i%3].addr, key, scarceBody, false, nil)
		}()
	}
	close(gate)
	wg.Wait()
	return out
}

// sortScarceCalls sorts the calls into admitted (200) and refused (402 in
// the error shape, docs/api.md#errors) by request id, and counts the
// admitted per replica; any other answer fails the test.
func sortScarceCalls(t *testing.T, out []callResult, replicas int) (admitted, refused map[string]bool, perReplica []int) {
	t.Helper()
	admitted, refused = map[string]bool{}, map[string]bool{}
	perReplica = make([]int, replicas)
	for _, r := range out {
		switch {
		case r.err != nil || r.rid == "":
			t.Errorf("call: %v", r)
		case r.status == 200:
			admitted[r.rid] = true
			perReplica[r.replica]++
		case r.status == 402:
			refused[r.rid] = true
			if r.typ != "insufficient_quota" || r.code != "insufficient_credit" || r.shouldRetry != "false" ||
				!strings.Contains(r.message, r.rid) || !strings.Contains(r.message, "ops@relay.test") {
				t.Errorf("a 402 not in the error shape (docs/api.md#errors): %v %q x-should-retry %q", r, r.message, r.shouldRetry)
			}
		default:
			t.Errorf("want 200 or 402: %v %q", r, r.message)
		}
	}
	return admitted, refused, perReplica
}

// checkChargedOnce wants each admitted call charged once, with the hold
// and the charge p, and no refused call charged.
func checkChargedOnce(t *testing.T, entries []entry, p holdAndCharge, admitted, refused map[string]bool) {
	t.Helper()
	charged := map[string]int{}
	for _, e := range entries {
		if e.Kind == "charge" {
			charged[e.RequestID]++
			if int64(e.Hold) != p.hold || -int64(e.Amount) != p.charge {
				t.Errorf("charge of %s: hold %d, amount %d; want %d and −%d", e.RequestID, e.Hold, e.Amount, p.hold, p.charge)
			}
		}
	}
	for rid := range admitted {
		if charged[rid] != 1 {
			t.Errorf("admitted call %s charged %d times", rid, charged[rid])
		}
	}
	for rid := range refused {
		if charged[rid] != 0 {
			t.Errorf("refused call %s charged", rid)
		}
	}
	if len(charged) != len(admitted) {
		t.Errorf("%d calls charged, %d admitted", len(charged), len(admitted))
	}
}

// Three replicas with a 2 s lease, 50 slow streams round-robin over them;
// one replica is killed (SIGKILL) with its streams in flight. Its holds
// stay until their lease runs out (at most a lease after its last renewal),
// then the next sweep of a survivor (every lease/2) releases them with a
// 'recovery' entry, uncharged; the survivors' streams, renewed all along,
// finish and are each charged once; the books balance.
func TestReplicasRecoverKilledReplica(t *testing.T) {
	needPostgres(t)
	dsn := replicaDatabase(t)
	simAddr := freeAddr(t)
	startSim(t, simAddr, "-chunks", "20", "-chunk-gap", "250ms") // 5 s streams: more than two leases
	const lease = 2 * time.Second
	reps := startReplicas(t, 3, replicaOpts{dsn: dsn, sim: simAddr, lease: lease})
	key := newAccount(t, reps[1].addr, "acme", pricing.Nano(10_000_000_000))
	body := `{"model":"modelf-flash","messages":[{"role":"user","content":"a long story"}]}`

	const streams = 50
	out, streamsEnd := startStreams(t, reps, key, body, streams)
	if a := account(t, reps[1].addr, "acme"); a.Held <= 0 {
		t.Fatalf("the streams hold nothing: %+v", a)
	}
	dead := reps[0]
	if err := dead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_, _ = dead.cmd.Process.Wait()
	// The holds of replica 0's streams: a lease after its last renewal, and
	// within a sweep interval more, the survivors release them.
	wantDead := (streams + 2) / 3
	bound := lease + lease/2 + 3*time.Second // the lease, the sweep interval, and slack for a busy box
	waitRecoveries(t, reps[1].addr, wantDead, killed, bound)
	recovered := time.Since(killed)
	streamsEnd()

	a := waitHeldZero(t, reps[2].addr, "acme", 20*time.Second, dsn)
	entries := journal(t, reps[2].addr, "acme")
	checkBooks(t, entries, a)
	hold, survived := checkKilledStreamsRecovered(t, entries, out)
	t.Logf("killed a replica with %d of %d streams in flight: its holds (%s USD each) recovered %s after the kill (lease %s, sweep every %s); %d streams on the survivors settled",
		wantDead, streams, hold.Fixed(), recovered.Round(time.Millisecond), lease, lease/2, survived)
}

// waitRecoveries waits for acme's journal to hold want recovery entries,
// and fails if it holds more, or fewer bound after killed.
func waitRecoveries(t *testing.T, addr string, want int, killed time.Time, bound time.Duration) {
	t.Helper()
	for {
		n := 0
		for _, e := range journal(t, addr, "acme") {
			if e.Kind == "recovery" {
				n++
			}
		}
		if n == want {
			return
		}
		if n > want || time.Since(killed) > bound {
			t.Fatalf("%d recovery entries %s after the kill; want the killed replica's %d within %s", n, time.Since(killed).Round(time.Millisecond), want, bound)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkKilledStreamsRecovered wants each stream on the killed replica 0
// unfinished with one recovery entry and no charge, all for the same
// hold (returned), and each stream on a survivor finished and charged
// once; it counts the latter.
func checkKilledStreamsRecovered(t *testing.T, entries []entry, out []callResult) (hold pricing.Nano, survived int) {
	t.Helper()
	kinds := map[string][]string{}
	for _, e := range entries {
		kinds[e.RequestID] = append(kinds[e.RequestID], e.Kind)
		if e.Kind == "recovery" {
			if hold != 0 && e.Hold != hold {
				t.Errorf("recovery entries for different holds: %s and %s USD", hold.Fixed(), e.Hold.Fixed())
			}
			hold = e.Hold
		}
	}
	for _, r := range out {
		got := strings.Join(kinds[r.rid], ",")
		switch {
		case r.rid == "":
			t.Errorf("a stream without a request id: %v", r)
		case r.replica == 0 && got != "recovery":
			t.Errorf("stream %s on the killed replica: journal %q, want one recovery and no charge", r.rid, got)
		case r.replica == 0 && r.done:
			t.Errorf("stream %s on the killed replica finished: %v", r.rid, r)
		case r.replica != 0 && (r.status != 200 || !r.done || r.err != nil):
			t.Errorf("stream on a surviving replica: %v", r)
		case r.replica != 0 && got != "charge":
			t.Errorf("stream %s on a surviving replica: journal %q, want one charge", r.rid, got)
		case r.replica != 0:
			survived++
		}
	}
	return hold, survived
}

var retriesLine = regexp.MustCompile(`(?m)^relay_store_retries_total\{op="settle"\} (\S+)$`)

// settleRetries is relay_store_retries_total{op="settle"} of a replica.
func settleRetries(t *testing.T, addr string) float64 {
	t.Helper()
	resp, err := replicaClient.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	m := retriesLine.FindSubmatch(page)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// readyz returns a replica's /readyz status and body.
func readyz(addr string) (int, string) {
	resp, err := replicaClient.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The database stops mid-load and starts again (a proxy in front of it is
// cut: see dbProxy), under three replicas with a 2 s lease and callers
// that keep calling. While it is down every call is answered at once with
// 503 store_unavailable and Retry-After — never a 500, never a wait — and
// /readyz says not ready; streams answered before the cut finish during
// it, their settles waiting for the database. Once it is back, without a
// restart, /readyz is ready and calls succeed; every call answered 200 is
// charged exactly once (the streams of the cut among them, after the
// return), nothing answered 503 is charged, and the books balance. The
// outage outlasts the lease, so a survivor's sweep may release a hold
// before its owner's settle comes back: that settle still charges.
func TestDatabaseOutage(t *testing.T) {
	proxy := postgresProxy(t)
	dsn := replicaDatabase(t)
	simAddr := freeAddr(t)
	startSim(t, simAddr, "-chunks", "10", "-chunk-gap", "150ms") // 1.5 s streams
	const lease = 2 * time.Second
	reps := startReplicas(t, 3, replicaOpts{dsn: withDatabase(t, dsn, "", proxy.Addr()), sim: simAddr, lease: lease})
	key := newAccount(t, reps[0].addr, "acme", pricing.Nano(10_000_000_000))
	body := `{"model":"modelf-flash","messages":[{"role":"user","content":"through an outage"}]}`

	load := startOutageLoad(t, reps, key, body)
	t0 := time.Now()
	waitUntil(t, "30 calls answered before the outage", 30*time.Second, func() bool { ok, _ := load.since(t0); return ok >= 30 })

	// Streams in flight when the database goes.
	const streams = 12
	sout, streamsEnd := startStreams(t, reps, key, body, streams)
	var at outageTimes
	at.cut = time.Now()
	proxy.Cut()
	t.Logf("database cut with %d streams in flight", streams)
	checkStreamsFinish(t, sout, streamsEnd)
	checkReplicasRefuse(t, reps, key, body)
	// The outage outlasts the lease of every hold taken before it.
	waitUntil(t, "20 calls refused during the outage", 20*time.Second, func() bool { _, n := load.since(at.cut); return n >= 20 })
	for time.Since(at.cut) < lease+lease/2 {
		time.Sleep(50 * time.Millisecond)
	}

	proxy.Restore(t)
	at.back = time.Now()
	waitReplicasReady(t, reps)
	at.ready = time.Now()
	t.Logf("database down for %s; every replica ready %s after it came back", at.back.Sub(at.cut).Round(time.Millisecond), at.ready.Sub(at.back).Round(time.Millisecond))
	waitUntil(t, "30 calls answered after the outage", 20*time.Second, func() bool { ok, _ := load.since(at.ready); return ok >= 30 })
	load.end()

	// Nothing stays held, and every call answered 200 is charged: a sweep
	// may have released a hold (nothing held) before its owner's settle,
	// retried with a backoff of up to 2 s, came back to charge it.
	all := append(load.results, sout...)
	entries := waitAllCharged(t, reps, dsn, all)
	checkBooks(t, entries, account(t, reps[0].addr, "acme"))
	byRID := journalByRequest(t, entries, all)
	tally := checkOutageCalls(t, all, byRID, at)
	for _, r := range sout {
		if s := byRID[r.rid]; s != nil && s.charges == 1 && !s.charged.After(at.back) {
			t.Errorf("stream %s charged at %s, before the outage ended", r.rid, s.charged)
		}
	}
	var retries float64
	for _, g := range reps {
		retries += settleRetries(t, g.addr)
	}
	if retries < streams {
		t.Errorf("relay_store_retries_total{op=\"settle\"} = %v across the replicas; each of the %d streams settled during the outage retried", retries, streams)
	}
	t.Logf("%d calls answered 200 and charged once (%d after their hold had been recovered), %d refused 503 store_unavailable (slowest %s), none charged (%d whose hold had landed, recovered); %v settle retries",
		tally.ok, tally.late, tally.refused, tally.worst.Round(time.Millisecond), tally.landed, retries)
}

// waitUntil waits up to within for cond, 20 ms between looks, and fails
// the test naming what did not happen (and *last[0], if given).
func waitUntil(t *testing.T, what string, within time.Duration, cond func() bool, last ...*string) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			detail := ""
			if len(last) > 0 {
				detail = *last[0]
			}
			t.Fatalf("%s: not within %s %s", what, within, detail)
		}
	}
}

// outageLoad is callers that keep calling, two per replica, until end.
type outageLoad struct {
	mu      sync.Mutex
	results []callResult
	end     func() // stops the callers and waits for them; once
}

// startOutageLoad starts six callers of body with key, two per replica;
// they are stopped before the replicas go, should the test end early.
func startOutageLoad(t *testing.T, reps []*gatewayProc, key, body string) *outageLoad {
	l := &outageLoad{}
	stop := make(chan struct{})
	var callers sync.WaitGroup
	l.end = sync.OnceFunc(func() { close(stop); callers.Wait() })
	t.Cleanup(l.end)
	for w := 0; w < 6; w++ {
		callers.Add(1)
		go func() {
			defer callers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := relayCall(w%3, reps[w%3].addr, key, body, false, nil)
				l.mu.Lock()
				l.results = append(l.results, r)
				l.mu.Unlock()
				if r.status != 200 {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	return l
}

// since counts the calls started after t0 answered 200 and 503.
func (l *outageLoad) since(t0 time.Time) (ok, unavailable int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.results {
		if r.start.After(t0) && r.status == 200 {
			ok++
		}
		if r.start.After(t0) && r.status == 503 {
			unavailable++
		}
	}
	return ok, unavailable
}

// startStreams starts n streams of body with key, stream i on replica i%3,
// and waits until each has its first line (or has ended); wait waits for
// them to end, and out holds their results then.
func startStreams(t *testing.T, reps []*gatewayProc, key, body string, n int) (out []callResult, wait func()) {
	t.Helper()
	out = make([]callResult, n)
	started := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = relayCall(i%3, reps[i%3].addr, key, body, true, started)
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d of %d streams started", i, n)
		}
	}
	return out, wg.Wait
}

// checkStreamsFinish wants the streams answered before the cut to finish
// whole while the database is down: the provider does not need it.
func checkStreamsFinish(t *testing.T, sout []callResult, wait func()) {
	t.Helper()
	streamsDone := make(chan struct{})
	go func() { wait(); close(streamsDone) }()
	select {
	case <-streamsDone:
	case <-time.After(20 * time.Second):
		t.Fatal("the streams did not finish during the outage")
	}
	for _, r := range sout {
		if r.status != 200 || !r.done || r.err != nil {
			t.Errorf("a stream answered before the cut did not finish during it: %v", r)
		}
	}
}

// checkReplicasRefuse wants every replica to say not ready, and to refuse
// a call with 503 store_unavailable and Retry-After.
func checkReplicasRefuse(t *testing.T, reps []*gatewayProc, key, body string) {
	t.Helper()
	for i, g := range reps {
		waitUntil(t, fmt.Sprintf("replica %d /readyz not ready", i), 10*time.Second, func() bool {
			code, _ := readyz(g.addr)
			return code == 503
		})
		if _, text := readyz(g.addr); !strings.Contains(text, "not ready") || !strings.Contains(text, "store") {
			t.Errorf("replica %d /readyz during the outage: %s", i, text)
		}
		r := relayCall(i, g.addr, key, body, false, nil)
		if r.status != 503 || r.code != "store_unavailable" || r.retryAfter == "" || r.err != nil || !strings.Contains(r.message, r.rid) {
			t.Errorf("replica %d during the outage: %v Retry-After %q %q", i, r, r.retryAfter, r.message)
		}
	}
}

// waitReplicasReady waits up to 20 s for each replica's /readyz to be 200.
func waitReplicasReady(t *testing.T, reps []*gatewayProc) {
	t.Helper()
	for i, g := range reps {
		var last string
		waitUntil(t, fmt.Sprintf("replica %d /readyz ready", i), 20*time.Second, func() bool {
			code, text := readyz(g.addr)
			if last = text; code != 200 {
				last += "\n" + tail(g.output(), 3000)
			}
			return code == 200
		}, &last)
	}
}

// waitAllCharged waits for nothing to be held, then up to 30 s for every
// call of all answered 200 to have its charge, and returns the journal.
func waitAllCharged(t *testing.T, reps []*gatewayProc, dsn string, all []callResult) []entry {
	t.Helper()
	waitHeldZero(t, reps[0].addr, "acme", 30*time.Second, dsn)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		entries := journal(t, reps[1].addr, "acme")
		charged := map[string]bool{}
		for _, e := range entries {
			if e.Kind == "charge" {
				charged[e.RequestID] = true
			}
		}
		missing := 0
		for _, r := range all {
			if r.status == 200 && !charged[r.rid] {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			return entries
		}
	}
}

// requestEntries is what the journal holds for one request.
type requestEntries struct {
	charges, recoveries int
	charged             time.Time // of the last charge
}

// journalByRequest sorts the journal by request, and wants no entries for
// a request none of the calls of all made. An allotment (gateway/billing/allot.go)
// swept while the database was away has a recovery entry, and nothing
// else: never a charge.
func journalByRequest(t *testing.T, entries []entry, all []callResult) map[string]*requestEntries {
	t.Helper()
	byRID := map[string]*requestEntries{}
	for _, e := range entries {
		if e.Endpoint == "allotment" {
			if e.Kind != "recovery" || e.Amount != 0 {
				t.Errorf("allotment %s has a %s entry of %v", e.RequestID, e.Kind, e.Amount)
			}
			continue
		}
		s := byRID[e.RequestID]
		if s == nil {
			s = &requestEntries{}
			byRID[e.RequestID] = s
		}
		switch e.Kind {
		case "charge":
			s.charges++
			s.charged = e.Time
		case "recovery":
			s.recoveries++
		}
	}
	made := map[string]bool{}
	for _, r := range all {
		made[r.rid] = true
	}
	for rid := range byRID {
		if rid != "" && !made[rid] {
			t.Errorf("journal entries for %s, a request no caller saw", rid)
		}
	}
	return byRID
}

// outageTimes are the moments of the outage: the database cut, back, and
// every replica ready again.
type outageTimes struct{ cut, back, ready time.Time }

// outageTally counts the calls of the outage test: answered 200 (late:
// after their hold was recovered), refused 503 (landed: whose hold was
// recovered), and the slowest refusal.
type outageTally struct {
	ok, late, refused, landed int
	worst                     time.Duration
}

// checkOutageCalls wants every call answered 200 and charged once, or
// refused at once during the outage with 503 store_unavailable and
// Retry-After and not charged.
func checkOutageCalls(t *testing.T, all []callResult, byRID map[string]*requestEntries, at outageTimes) outageTally {
	t.Helper()
	var n outageTally
	for _, r := range all {
		s := byRID[r.rid]
		if s == nil {
			s = &requestEntries{}
		}
		switch {
		case r.err != nil || r.rid == "":
			t.Errorf("call: %v", r)
		case r.status == 200:
			n.ok++
			if s.charges != 1 {
				t.Errorf("call %v answered 200, charged %d times", r, s.charges)
			}
			if s.recoveries > 0 {
				n.late++
			}
		case r.status == 503:
			n.refused++
			n.worst = max(n.worst, r.latency())
			checkRefusedInOutage(t, r, s, at)
			if s.recoveries > 0 { // its hold landed as the database went: released by a sweep
				n.landed++
			}
		default:
			t.Errorf("want 200 or 503: %v %q", r, r.message)
		}
	}
	if n.worst > 5*time.Second {
		t.Errorf("a call took %s to be refused during the outage; it should be at once", n.worst)
	}
	return n
}

// checkRefusedInOutage wants a call answered 503 to be store_unavailable
// with Retry-After, not charged, and refused during the outage.
func checkRefusedInOutage(t *testing.T, r callResult, s *requestEntries, at outageTimes) {
	t.Helper()
	if r.code != "store_unavailable" || r.retryAfter == "" || r.typ != "service_unavailable_error" {
		t.Errorf("a 503 that is not store_unavailable with Retry-After: %v %q", r, r.message)
	}
	if s.charges != 0 {
		t.Errorf("call %v answered 503, charged", r)
	}
	if r.start.After(at.ready) {
		t.Errorf("call %v refused after every replica was ready again", r)
	}
	if r.end.Before(at.cut) {
		t.Errorf("call %v refused before the outage", r)
	}
}
