package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/modelrelay/modelrelay/store/postgres/pgtest"
)

// The sim's stream in the cluster test: five content chunks 200 ms apart,
// so an unbuffered stream spreads its events over 800 ms.
const (
	clusterChunks   = 5
	clusterChunkGap = 200 * time.Millisecond
)

// cluster is deploy/cluster/run.sh running: three replicas on one
// PostgreSQL database, relay sim, nginx in front.
type cluster struct {
	lb       string   // the balancer's address
	replicas []string // the replicas' addresses
	dir      string   // CLUSTER_DIR: configs, logs, pid files
	out      *syncBuffer
}

// findNginx returns the nginx binary, or skips t saying how to install it.
func findNginx(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	t.Skip("cluster test skipped: nginx is not installed (make nginx as root, or apt-get install nginx-light)")
	return ""
}

// startCluster runs the example as `make cluster` does, on ports and a
// database of the test's own, and stops it (SIGTERM) at the end. With
// redisURL the replicas share it, under a key prefix of the test's own.
func startCluster(t *testing.T, redisURL string) *cluster {
	t.Helper()
	pgtest.Need(t)
	nginx := findNginx(t)
	dsn := pgtest.Database(t, "relay_cluster")
	root, _ := filepath.Abs("../..")
	c := &cluster{lb: freeAddr(t), dir: t.TempDir(), out: &syncBuffer{&sync.Mutex{}, &bytes.Buffer{}}}
	cmd := exec.Command(filepath.Join(root, "deploy", "cluster", "run.sh"))
	cmd.Env = c.env(t, redisURL, dsn, nginx)
	// A group of its own: if run.sh does not stop, the test ends it and
	// everything it started, and nothing else.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = c.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(45 * time.Second):
			t.Errorf("run.sh did not stop within 45 s of SIGTERM:\n%s", c.out)
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			c.dumpLogs(t)
		}
	})
	select {
	case ok := <-c.watch(cmd, stdout, exited):
		if !ok {
			t.Fatalf("run.sh exited before the cluster was ready:\n%s", c.out)
		}
	case <-time.After(150 * time.Second):
		t.Fatalf("the cluster was not ready in 150 s:\n%s", c.out)
	}
	return c
}

// env is run.sh's environment: the test's own, with the cluster's ports
// (it picks the replicas' addresses), database and binaries. With
// redisURL the replicas share it, under a key prefix of the test's own.
func (c *cluster) env(t *testing.T, redisURL, dsn, nginx string) []string {
	t.Helper()
	var ports []string
	for i := 0; i < 3; i++ {
		c.replicas = append(c.replicas, freeAddr(t))
		_, p, _ := net.SplitHostPort(c.replicas[i])
		ports = append(ports, p)
	}
	_, lbPort, _ := net.SplitHostPort(c.lb)
	_, simPort, _ := net.SplitHostPort(freeAddr(t))
	cache := wasmCache(c.dir)
	var env []string
	for _, kv := range os.Environ() {
		// Without redisURL the example's redis: block stays commented
		// out, and the replicas share the database alone.
		if !strings.HasPrefix(kv, "RELAY_REDIS_URL=") {
			env = append(env, kv)
		}
	}
	if redisURL != "" {
		env = append(env, "RELAY_REDIS_URL="+redisURL, "CLUSTER_REDIS_PREFIX=relay-test-"+filepath.Base(c.dir)+":")
	}
	return append(env,
		"CLUSTER_PORT="+lbPort,
		"CLUSTER_REPLICA_PORTS="+strings.Join(ports, " "),
		"CLUSTER_SIM_PORT="+simPort,
		fmt.Sprintf("CLUSTER_SIM_ARGS=-chunks %d -chunk-gap %s", clusterChunks, clusterChunkGap),
		"CLUSTER_LEASE=2s",
		"CLUSTER_DIR="+c.dir,
		"RELAY_DATABASE_URL="+dsn,
		"RELAY_ADMIN_TOKEN="+adminToken,
		"RELAY_BIN="+relayBin,
		"RELAY_PLUGIN_DIR="+pluginDir,
		"RELAY_WASM_CACHE="+cache,
		"NGINX="+nginx,
	)
}

// watch copies run.sh's stdout into c.out and closes exited once it has
// exited; the channel it returns gets true once run.sh says the cluster
// is ready, or false if it exits first.
func (c *cluster) watch(cmd *exec.Cmd, stdout io.Reader, exited chan<- struct{}) <-chan bool {
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			l := sc.Text()
			fmt.Fprintln(c.out, l)
			if !sent && strings.HasPrefix(l, "cluster ready: http://"+c.lb) {
				ready <- true
				sent = true
			}
		}
		_ = cmd.Wait()
		close(exited)
		if !sent {
			ready <- false
		}
	}()
	return ready
}

func (s syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (c *cluster) dumpLogs(t *testing.T) {
	logs, _ := filepath.Glob(filepath.Join(c.dir, "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		t.Logf("%s:\n%s", filepath.Base(l), tail(string(b), 4000))
	}
}

// pid is the pid run.sh recorded for one of its processes.
func (c *cluster) pid(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.dir, name+".pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s.pid: %v", name, err)
	}
	return pid
}

var chatRequestsLine = regexp.MustCompile(`(?m)^relay_requests_total\{([^}]*)\} (\S+)$`)

// chatCalls is the number of chat completions a replica answered 200,
// from its own /metrics.
func chatCalls(t *testing.T, addr string) int {
	t.Helper()
	resp, err := poolClient.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	n := 0
	for _, m := range chatRequestsLine.FindAllStringSubmatch(string(page), -1) {
		if strings.Contains(m[1], `endpoint="chat_completions"`) && strings.Contains(m[1], `status="200"`) {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			n += int(v)
		}
	}
	return n
}

// streamCall is one streamed chat completion through the balancer.
type streamCall struct {
	start  time.Time
	status int
	rid    string
	done   bool // the stream ended with data: [DONE]
	err    error
}

func callStream(addr, key string) streamCall {
	c := streamCall{start: time.Now()}
	body := `{"model":"modelf-flash","messages":[{"role":"user","content":"through the balancer"}],"stream":true}`
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := poolClient.Do(req)
	if err != nil {
		c.err = err
		return c
	}
	defer resp.Body.Close()
	c.status, c.rid = resp.StatusCode, resp.Header.Get("X-Request-Id")
	data, err := io.ReadAll(resp.Body)
	c.err = err
	c.done = strings.Contains(string(data), "data: [DONE]")
	return c
}

// TestClusterBehindNginx runs the deployment example (deploy/cluster/run.sh,
// what `make cluster` starts): three `relay serve` replicas on one
// PostgreSQL database, `relay sim` as their provider, Debian's nginx in
// front. Through the balancer:
//
//	(a) the official OpenAI Go SDK streams a chat completion whose events
//	    arrive as the sim sends them, not buffered into one piece;
//	(b) its charge lands in the shared journal exactly once;
//	(c) calls are spread over all three replicas;
//	(d) with one replica killed (SIGKILL) under load, every call started
//	    after it stopped answering succeeds on the other two, and the books
//	    balance once its holds are recovered.
func TestClusterBehindNginx(t *testing.T) {
	c := startCluster(t, "")
	key := clusterKey(t, c.lb)
	rid := checkSDKStreamUnbuffered(t, c.lb, key)

	// (b) One charge, under the request id the balancer passed back. The
	// admin read may reach another replica than the one that answered, so
	// it waits for the settle (read after answer across replicas is the
	// Redis work's promise, not this example's).
	waitUntil(t, "(b) a charge for "+rid+" in the journal", 10*time.Second, func() bool { return chargesOf(t, c.lb, rid) != 0 })

	before := checkSpread(t, c, key)
	if n := chargesOf(t, c.lb, rid); n != 1 {
		t.Errorf("(b) the SDK stream %s is charged %d times", rid, n)
	}

	// (d) Four callers streaming in a loop; replica 2 killed after a second.
	const victim = 1 // replica-2
	calls, down := streamThroughKill(t, c, key, victim)
	var after, afterOK, cut int
	for _, sc := range calls {
		ok := sc.err == nil && sc.status == 200 && sc.done
		if !sc.start.Before(down) {
			after++
			if ok {
				afterOK++
			} else {
				t.Errorf("(d) a call started %s after replica 2 went down failed: status %d, done %v, err %v",
					sc.start.Sub(down).Round(time.Millisecond), sc.status, sc.done, sc.err)
			}
		} else if !ok {
			cut++
		}
	}
	if after < 20 {
		t.Errorf("(d) only %d calls started after replica 2 went down", after)
	}
	for i, r := range c.replicas {
		if i == victim {
			continue
		}
		if n := chatCalls(t, r); n <= before[i] {
			t.Errorf("(d) replica %d answered no call after replica 2 went down (%d before, %d after)", i+1, before[i], n)
		}
	}
	t.Logf("(d) %d calls: %d started after replica 2 went down, %d of them succeeded; %d in flight on it were cut",
		len(calls), after, afterOK, cut)
	checkClusterBooks(t, c.lb, calls)
	if !strings.Contains(c.out.String(), "replica-2") {
		t.Errorf("run.sh did not report the killed replica:\n%s", c.out)
	}
}

// clusterKey creates account acme with $10 through the balancer lb, and a
// key on it.
func clusterKey(t *testing.T, lb string) string {
	t.Helper()
	for _, args := range [][]string{{"accounts", "create", "-account", "acme"}, {"accounts", "credit", "-account", "acme", "-usd", "10"}} {
		if _, e, code := cli(t, lb, args...); code != 0 {
			t.Fatalf("%v through the balancer: %s", args, e)
		}
	}
	key, e, code := cli(t, lb, "keys", "create", "-account", "acme", "-route", "standard")
	key = strings.TrimSpace(key)
	if code != 0 || !strings.HasPrefix(key, "sk-") {
		t.Fatalf("keys create through the balancer: %q %s", key, e)
	}
	return key
}

// checkSDKStreamUnbuffered (a) streams a chat completion with the official
// OpenAI Go SDK through lb and wants its content chunks to arrive as the
// sim sends them, not buffered into one piece; it returns the answer's
// request id.
func checkSDKStreamUnbuffered(t *testing.T, lb, key string) string {
	t.Helper()
	sdk := openai.NewClient(option.WithBaseURL("http://"+lb+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	var httpResp *http.Response
	prompt := "Stream through nginx to the gateway"
	start := time.Now()
	s := sdk.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:    "modelf-flash",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
	}, option.WithResponseInto(&httpResp))
	acc := openai.ChatCompletionAccumulator{}
	var arrivals []time.Duration // of the chunks that carry content
	for s.Next() {
		ch := s.Current()
		if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
			arrivals = append(arrivals, time.Since(start))
		}
		acc.AddChunk(ch)
	}
	total := time.Since(start)
	if err := s.Err(); err != nil {
		t.Fatalf("(a) SDK stream: %v", err)
	}
	if len(acc.Choices) != 1 || !strings.Contains(acc.Choices[0].Message.Content, prompt) {
		t.Fatalf("(a) SDK stream content: %+v", acc.Choices)
	}
	if len(arrivals) != clusterChunks {
		t.Fatalf("(a) %d content chunks, want %d", len(arrivals), clusterChunks)
	}
	// Unbuffered, the first and last content chunks are 4 × 200 ms apart;
	// buffered anywhere on the way, they arrive together.
	spread := arrivals[len(arrivals)-1] - arrivals[0]
	if want := 3 * clusterChunkGap; spread < want {
		t.Errorf("(a) content chunks arrived within %s of each other (want ≥ %s): the stream is buffered; arrivals %v", spread, want, arrivals)
	}
	if arrivals[0] > total-3*clusterChunkGap {
		t.Errorf("(a) the first content chunk came at %s of a %s stream: the stream is buffered", arrivals[0], total)
	}
	t.Logf("(a) SDK stream: content chunks at %v, stream done at %s", arrivals, total.Round(time.Millisecond))
	rid := ""
	if httpResp != nil {
		rid = httpResp.Header.Get("X-Request-Id")
	}
	if rid == "" {
		t.Fatal("(b) the stream's answer carries no X-Request-Id")
	}
	return rid
}

// chargesOf counts the charges for request rid in acme's journal.
func chargesOf(t *testing.T, lb, rid string) int {
	t.Helper()
	n := 0
	for _, e := range journal(t, lb, "acme") {
		if e.RequestID == rid && e.Kind == "charge" {
			n++
		}
	}
	return n
}

// checkSpread (c) makes twelve calls through the balancer and wants each
// replica to have answered at least two of the 13 calls so far; it
// returns how many each answered.
func checkSpread(t *testing.T, c *cluster, key string) []int {
	t.Helper()
	for i := 0; i < 12; i++ {
		if o := chatCall(t, c.lb, key, false); o.status != 200 {
			t.Fatalf("(c) call %d through the balancer: %d %s", i, o.status, o.code)
		}
	}
	// A replica counts a call once it has handed over the whole answer,
	// a moment after the caller has it.
	before := make([]int, len(c.replicas))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		sum := 0
		for i, r := range c.replicas {
			before[i] = chatCalls(t, r)
			sum += before[i]
		}
		if sum == 13 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("(c) the replicas count %v calls, want 13 in all", before)
		}
	}
	for i, n := range before {
		if n < 2 {
			t.Errorf("(c) replica %d answered %d of 13 calls", i+1, n)
		}
	}
	t.Logf("(c) 13 calls through the balancer, per replica: %v", before)
	return before
}

// streamThroughKill runs four callers streaming through the balancer in a
// loop, kills replica victim (SIGKILL) once they have streamed twice each,
// and goes on past nginx's fail_timeout; it returns the calls and when the
// replica stopped answering (a connection to it refused).
func streamThroughKill(t *testing.T, c *cluster, key string, victim int) ([]streamCall, time.Time) {
	t.Helper()
	var (
		mu    sync.Mutex
		calls []streamCall
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				sc := callStream(c.lb, key)
				mu.Lock()
				calls = append(calls, sc)
				mu.Unlock()
			}
		}()
	}
	stopCallers := func() { close(stop); wg.Wait() }
	// The kill comes under load: once each caller has streamed twice.
	waitUntil(t, "(d) eight streams through the balancer before the kill", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 8
	})
	if err := syscall.Kill(c.pid(t, fmt.Sprintf("replica-%d", victim+1)), syscall.SIGKILL); err != nil {
		stopCallers()
		t.Fatal(err)
	}
	var down time.Time
	for deadline := time.Now().Add(5 * time.Second); down.IsZero(); time.Sleep(5 * time.Millisecond) {
		conn, err := net.Dial("tcp", c.replicas[victim])
		if err != nil {
			down = time.Now()
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			stopCallers()
			t.Fatal("(d) replica 2 still accepts connections 5 s after SIGKILL")
		}
	}
	// Past nginx's fail_timeout (5 s), so that the balancer tries the dead
	// replica again and must pass those calls on to the others.
	time.Sleep(6 * time.Second)
	stopCallers()
	return calls, down
}

// checkClusterBooks wants the killed replica's holds released by the
// others (lease 2 s) and never charged, each successful call of calls
// charged once, and the books to balance.
func checkClusterBooks(t *testing.T, lb string, calls []streamCall) {
	t.Helper()
	var account struct {
		Balance string `json:"balance_usd"`
		Held    string `json:"held_usd"`
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		adminGet(t, lb, "/admin/accounts/acme", &account)
		if account.Held == "0.000000000" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("(d) %s still held 15 s after replica 2 was killed", account.Held)
		}
	}
	charged := map[string]int{}
	var credits, charges int64
	for _, e := range journal(t, lb, "acme") {
		switch e.Kind {
		case "credit":
			credits += int64(e.Amount)
		case "charge":
			charged[e.RequestID]++
			charges -= int64(e.Amount)
		case "recovery":
			if int64(e.Amount) != 0 {
				t.Errorf("(d) a recovery entry moves money: %+v", e)
			}
		default:
			t.Errorf("(d) unexpected journal entry %+v", e)
		}
	}
	for _, sc := range calls {
		if sc.err == nil && sc.status == 200 && sc.done && charged[sc.rid] != 1 {
			t.Errorf("(d) successful call %s charged %d times", sc.rid, charged[sc.rid])
		}
	}
	for r, n := range charged {
		if n != 1 {
			t.Errorf("(d) %s charged %d times", r, n)
		}
	}
	if bal := nanoOf(t, account.Balance); credits-bal != charges {
		t.Errorf("(d) credits %d − balance %d = %d, Σ charges %d", credits, bal, credits-bal, charges)
	}
}

// The example with Redis, as real processes behind nginx: a key revoked
// through the balancer is refused by every replica within a second, though
// each had it cached; and an admin read through the balancer right after an
// answer, whichever replica it reaches, shows that call's charge.
func TestClusterSharesThroughRedis(t *testing.T) {
	redisURL := os.Getenv("RELAY_TEST_REDIS")
	if redisURL == "" {
		t.Skip("skipped: set RELAY_TEST_REDIS (e.g. redis://127.0.0.1:6379/0) and RELAY_TEST_POSTGRES to run the cluster with Redis")
	}
	c := startCluster(t, redisURL)
	lb := c.lb
	key := clusterKey(t, lb)

	// Read after answer: each call's charge is in the very first read.
	for i := 0; i < 9; i++ {
		o := chatCall(t, lb, key, false)
		if o.status != 200 || o.rid == "" {
			t.Fatalf("call %d through the balancer: %d %s", i, o.status, o.code)
		}
		found := false
		for _, e := range journal(t, lb, "acme") {
			found = found || (e.Kind == "charge" && e.RequestID == o.rid)
		}
		if !found {
			t.Fatalf("call %d (%s): the admin read right after its answer does not show its charge", i, o.rid)
		}
	}

	// Revocation: every replica has the key cached, then it is revoked
	// through the balancer.
	for _, r := range c.replicas {
		if o := chatCall(t, r, key, false); o.status != 200 {
			t.Fatalf("a call on %s before the revocation: %d %s", r, o.status, o.code)
		}
	}
	if _, e, code := cli(t, lb, "keys", "revoke", key); code != 0 {
		t.Fatalf("keys revoke through the balancer: %s", e)
	}
	revoked := time.Now()
	for _, r := range c.replicas {
		for {
			o := chatCall(t, r, key, false)
			if o.status == 401 {
				break
			}
			if time.Since(revoked) > time.Second {
				t.Fatalf("%s still answers the revoked key %s after the revocation: %d", r, time.Since(revoked).Round(time.Millisecond), o.status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("every replica refused the revoked key within %s", time.Since(revoked).Round(time.Millisecond))
}
