package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The setup of the overload tests (overload_test.go): processes pinned to
// one CPU, the gateway they start, and what they read of a process (its CPU
// time, its log) and of a gateway (/metrics). Their PostgreSQL cluster:
// overload_pg_test.go.

// needOverload skips t unless RELAY_TEST_OVERLOAD=1.
func needOverload(t *testing.T) {
	t.Helper()
	if os.Getenv("RELAY_TEST_OVERLOAD") != "1" {
		t.Skip("overload tests skipped: they take minutes; set RELAY_TEST_OVERLOAD=1 (make test-overload) " +
			"(RELAY_TEST_OVERLOAD_ROUNDS=1 for one round, RELAY_TEST_OVERLOAD_LOAD=5s for shorter loads)")
	}
}

// overloadRounds is RELAY_TEST_OVERLOAD_ROUNDS, else def.
func overloadRounds(t *testing.T, def int) int { return envCount(t, "RELAY_TEST_OVERLOAD_ROUNDS", def) }

// overloadCallersFor is how many callers a round has:
// RELAY_TEST_OVERLOAD_CALLERS, else 64 (fewer measure a ledger that keeps
// up, as the bounds' defaults were, RATIONALE.md).
func overloadCallersFor(t *testing.T) int {
	return envCount(t, "RELAY_TEST_OVERLOAD_CALLERS", overloadCallers)
}

// envCount is the positive count the environment variable name says, else
// def.
func envCount(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive count", name, v)
	}
	return n
}

// overloadLoadFor is how long each round's callers call:
// RELAY_TEST_OVERLOAD_LOAD, else 15 s.
func overloadLoadFor(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("RELAY_TEST_OVERLOAD_LOAD")
	if v == "" {
		return 15 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("RELAY_TEST_OVERLOAD_LOAD=%q: want a duration", v)
	}
	return d
}

// cpus is where the overload tests run: the server side (gateways, sim,
// PostgreSQL) on one CPU, the test process that calls on another.
type cpus struct{ server, load int }

// pinTestProcess pins every thread of the test process to a CPU other than
// the one the server side gets, until t ends, and says which is which. It
// skips t on a box with fewer than two CPUs, or without taskset.
//
// Why pin the callers: the failure under test is the gateway, the sim and
// the database starved of CPU by each other. Left unpinned, the 64 callers'
// goroutines would take their share of the server's CPU too, and what the
// test measured would depend on how the kernel placed the load generator.
// Threads the Go runtime starts later inherit the mask of the thread that
// starts them, so pinning every existing thread (twice over, for threads
// started meanwhile) pins the process; children started meanwhile inherit
// it too (the admin CLI), except those taskset moves.
func pinTestProcess(t *testing.T) cpus {
	t.Helper()
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("overload tests skipped: they pin processes with taskset (util-linux), which is not installed")
	}
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	var allowed []int
	for c := 0; c < 1024 && len(allowed) < old.Count(); c++ {
		if old.IsSet(c) {
			allowed = append(allowed, c)
		}
	}
	if len(allowed) < 2 {
		t.Skipf("overload tests skipped: they need two CPUs (one for the server side, one for the callers), have %v", allowed)
	}
	// The taskset -c 1 where CPUs 0 and 1 are there.
	c := cpus{server: allowed[1], load: allowed[0]}
	var set unix.CPUSet
	set.Set(c.load)
	setThreads(t, &set)
	t.Cleanup(func() { setThreads(t, &old) })
	return c
}

// setThreads sets the CPU mask of every thread of the test process.
func setThreads(t *testing.T, set *unix.CPUSet) {
	t.Helper()
	for range 3 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			tid, _ := strconv.Atoi(task.Name())
			if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
				t.Fatalf("pin thread %d: %v", tid, err)
			}
		}
	}
}

// pinned is the command name with args, run by taskset on cpu.
func pinned(cpu int, name string, args ...string) *exec.Cmd {
	return exec.Command("taskset", append([]string{"-c", strconv.Itoa(cpu), name}, args...)...)
}

// checkPinned wants the process pid and all its descendants on cpu alone,
// and returns how many it checked: the pin must hold of every PostgreSQL
// process (the postmaster's backends and workers inherit it).
func checkPinned(t *testing.T, what string, pid, cpu int) int {
	t.Helper()
	children := map[int][]int{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		child, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat")); err == nil {
			if f := statFields(string(st)); len(f) > 1 {
				ppid, _ := strconv.Atoi(f[1])
				children[ppid] = append(children[ppid], child)
			}
		}
	}
	n := 0
	for todo := []int{pid}; len(todo) > 0; {
		p := todo[0]
		todo = append(todo[1:], children[p]...)
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(p, &set); err != nil {
			continue // ended since
		}
		n++
		if set.Count() != 1 || !set.IsSet(cpu) {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
			t.Errorf("%s: process %d (%s) may run on %d CPUs, want CPU %d alone", what, p, strings.TrimSpace(string(comm)), set.Count(), cpu)
		}
	}
	return n
}

// statFields are the fields of /proc/PID/stat after the command name (which
// may hold spaces): state, ppid, … utime is [11], stime [12].
func statFields(stat string) []string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(stat[i+1:])
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times: 100 on
// every Linux the tests run on (sysconf(_SC_CLK_TCK); x/sys has no sysconf).
const clockTicks = 100

// cpuTime is the CPU time (user and system) process pid has used.
func cpuTime(pid int) (time.Duration, error) {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := statFields(string(st))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, st)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, st)
	}
	return time.Duration(u+s) * time.Second / clockTicks, nil
}

// overloadGateway is what startOverloadGateway varies: the PostgreSQL
// database (else the Badger store, with sync_writes), the sim's address
// and the CPU.
type overloadGateway struct {
	dsn string
	sim string
	cpu int
}

// startOverloadGateway starts `relay serve` under taskset with the default
// settings but for the key rate and the connections per address (the
// callers are one address, with more calls than a key may make): default
// billing (allotments on PostgreSQL), default shedding, default pool and
// lease.
func startOverloadGateway(t *testing.T, o overloadGateway) *gatewayProc {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	cache := wasmCache(dir)
	st := "sync_writes: true # each commit on disk: the Badger store's queue is real\n"
	if o.dsn != "" {
		st = fmt.Sprintf("store: {driver: postgres, dsn: %q}\n", o.dsn)
	}
	// RELAY_TEST_OVERLOAD_BILLING sets billing keys, to measure against
	// other bounds, e.g. "max_store_backlog: -1, max_store_wait: -1s".
	if b := os.Getenv("RELAY_TEST_OVERLOAD_BILLING"); b != "" {
		st += "billing: {" + b + "}\n"
	}
	cfg := fmt.Sprintf(`listen: %s
data_dir: %s
support_email: ops@relay.test
admin_token: %s
plugins: {dir: %s, cache_dir: %s, poll: -1s}
limits:
  key_rate: {rate: 1000000, burst: 1000000}
server:
  max_connections_per_address: -1
%sroutes: [{name: standard}, {name: economy}]
lines:
  - {name: std, protocol: openai, base_url: "http://%s", models: ["*"], route: standard}
  - {name: eco, protocol: openai, base_url: "http://%s", models: ["*"], route: economy}
`, addr, filepath.Join(dir, "data"), adminToken, pluginDir, cache, st, o.sim, o.sim)
	config := filepath.Join(dir, "relay.yaml")
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGatewayCmd(t, pinned(o.cpu, relayBin, "serve", "-config", config), addr)
	logIfFailed(t, "relay serve "+addr, g)
	return g
}

// logIfFailed logs g's output but for its INFO lines (the end of it) when
// t has failed.
func logIfFailed(t *testing.T, what string, g *gatewayProc) {
	t.Cleanup(func() {
		if t.Failed() {
			var b strings.Builder
			for _, l := range strings.Split(g.output(), "\n") {
				if !strings.Contains(l, `"level":"INFO"`) {
					b.WriteString(l + "\n")
				}
			}
			t.Logf("%s, its log but for INFO lines:\n%s", what, tail(b.String(), 6000))
		}
	})
}

// logStats is what a gateway has logged: all of it, and without the access
// log (a line per request, which grows with the load by design), in bytes;
// its WARN and ERROR lines, and the commonest of their messages.
type logStats struct {
	total, noAccess int
	warns, errors   int
	top             string
	errs            string // the error of the first line of each message that has one
}

var logErr = regexp.MustCompile(`"error":"((?:[^"\\]|\\.)*)"`)

var logMsg = regexp.MustCompile(`"msg":"((?:[^"\\]|\\.)*)"`)

func readLog(out string) logStats {
	s := logStats{total: len(out)}
	msgs := map[string]int{}
	for l := range strings.Lines(out) {
		if strings.Contains(l, `"msg":"request"`) {
			continue
		}
		s.noAccess += len(l)
		warn, bad := strings.Contains(l, `"level":"WARN"`), strings.Contains(l, `"level":"ERROR"`)
		if warn {
			s.warns++
		}
		if bad {
			s.errors++
		}
		if m := logMsg.FindStringSubmatch(l); m != nil && (warn || bad) {
			if msgs[m[1]] == 0 {
				if e := logErr.FindStringSubmatch(l); e != nil {
					s.errs += fmt.Sprintf("; %.80q: %.300q", m[1], e[1])
				}
			}
			msgs[m[1]]++
		}
	}
	s.top = topCounts(msgs, 4)
	return s
}

// topCounts is the n commonest keys of counts with their counts.
func topCounts(counts map[string]int, n int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return counts[b] - counts[a] })
	var b strings.Builder
	for i, k := range keys {
		if i == n {
			fmt.Fprintf(&b, "; and %d more", len(keys)-n)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d× %.120q", counts[k], k)
	}
	return b.String()
}

// seriesLine is a sample of /metrics: name, labels, value.
var seriesLine = regexp.MustCompile(`(?m)^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$`)

// metricsPage is a gateway's /metrics.
func metricsPage(t *testing.T, addr string) string {
	t.Helper()
	resp, err := replicaClient.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricSum is the sum of every series of name on page, and whether there
// is one.
func metricSum(page, name string) (float64, bool) {
	sum, found := 0.0, false
	for _, m := range seriesLine.FindAllStringSubmatch(page, -1) {
		if m[1] == name {
			v, err := strconv.ParseFloat(m[3], 64)
			if err == nil {
				sum, found = sum+v, true
			}
		}
	}
	return sum, found
}

// metricText is metricSum as text for a log line: "absent" when there is
// no series.
func metricText(page, name string) string {
	v, ok := metricSum(page, name)
	if !ok {
		return "absent"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// peak is the highest ledger backlog a gateway's /metrics showed.
type peak struct{ backlog, age float64 }

// watchPeaks samples each gateway's relay_store_backlog and
// relay_store_backlog_age_seconds every 250 ms until end; the function
// returned waits for the peaks.
func (o *overloadRun) watchPeaks(end time.Time) func() []peak {
	peaks := make([]peak, len(o.gws))
	var wg sync.WaitGroup
	for i, g := range o.gws {
		wg.Go(func() {
			for ; time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
				resp, err := replicaClient.Get("http://" + g.addr + "/metrics")
				if err != nil {
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if v, ok := metricSum(string(b), "relay_store_backlog"); ok {
					peaks[i].backlog = max(peaks[i].backlog, v)
				}
				if v, ok := metricSum(string(b), "relay_store_backlog_age_seconds"); ok {
					peaks[i].age = max(peaks[i].age, v)
				}
			}
		})
	}
	return func() []peak { wg.Wait(); return peaks }
}

// vmHWM is process pid's peak resident set (VmHWM), as /proc says it.
func vmHWM(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
