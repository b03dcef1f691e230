package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/sim"
)

// The slow-client flood: a `relay serve` with 256 file descriptors (so a
// connection bound of (256 − 64) / 2 = 96) and at most 6 connections per
// client address, against 2,000 hostile clients from ten loopback addresses
// that send their headers, or their bodies with and without a valid key, a
// byte every half second, and come back a second after each refusal. While
// they press, an ordinary client on 127.0.0.1 keeps calling (chat, a
// stream, the model list) and every call answers 200 promptly; a stream
// started before the flood finishes whole; the gateway never runs out of
// descriptors; each kind of slow client is cut off at its deadline (the
// unkeyed ones at once); and once the clients go, so do their connections.
//
// The slow clients run in a child process (this test binary again, see
// floodChild): their 4,000 goroutines, slowed by the race detector, would
// otherwise queue ahead of the ordinary client's and the provider's in this
// process's scheduler, and the test would time its own run queue instead of
// the gateway.
func TestSlowClientsCannotTakeTheGatewayDown(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < floodAttackers+1000 {
		t.Fatalf("the test needs %d descriptors of its own; the limit is %d (%v)", floodAttackers+1000, lim.Cur, err)
	}
	g, slowSim := startFloodGateway(t)
	key, ecoKey, attackKey := floodKeys(t, g.addr)
	base := "http://" + g.addr
	// A new connection for every call: the gateway must go on accepting them.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}

	longStream := startLongStream(t, client, base, ecoKey, slowSim)
	idleFDs := gatewayFDs(g)
	f := startFloodChild(t, g.addr, attackKey)
	seen := callThroughFlood(t, client, base, key, g)
	res := f.end(t)

	checkOrdinaryCalls(t, seen, res, idleFDs)
	checkSlowClientsCut(t, res.Outcomes)
	checkResetsWereRefusals(t, client, base, res)
	checkLongStream(t, longStream)
	if strings.Contains(g.output(), "too many open files") {
		t.Errorf("the gateway ran out of descriptors:\n%s", tail(g.output(), 2000))
	}
	waitFloodConnsGone(t, client, base)
}

// The settings of the slow-client flood.
const (
	floodAttackers     = 2000
	floodAddresses     = 10 // 127.0.0.2 … 127.0.0.11
	floodPerAddress    = 6
	floodFDLimit       = 256
	floodHeaderTimeout = 3 * time.Second
	floodBodyTimeout   = 4 * time.Second
	floodWindow        = 8 * time.Second
	floodGap           = 500 * time.Millisecond // between two bytes of a slow client
)

// startFloodGateway starts `relay serve` with floodFDLimit descriptors, the
// flood's header and body timeouts and per-address bound, and its economy
// route on a provider whose streams last 12 s (returned); it waits until
// the gateway logs the connection bound its descriptors give, 96.
func startFloodGateway(t *testing.T) (*gatewayProc, *sim.Server) {
	t.Helper()
	fast := httptest.NewServer(sim.New(sim.Options{}))
	t.Cleanup(fast.Close)
	slowSim := sim.New(sim.Options{Chunks: 48, ChunkGap: 250 * time.Millisecond}) // a 12 s stream
	slow := httptest.NewServer(slowSim)
	t.Cleanup(slow.Close)
	t.Cleanup(slowSim.Close)

	dir := t.TempDir()
	addr := freeAddr(t)
	config := writeConfig(t, dir, addr, fast.URL)
	text, _ := os.ReadFile(config)
	text = bytes.Replace(text, []byte("{name: eco, protocol: openai, base_url: "+fast.URL), []byte("{name: eco, protocol: openai, base_url: "+slow.URL), 1)
	text = fmt.Appendf(text, "server: {header_timeout: %s, body_timeout: %s, max_connections_per_address: %d}\n", floodHeaderTimeout, floodBodyTimeout, floodPerAddress)
	if err := os.WriteFile(config, text, 0o600); err != nil {
		t.Fatal(err)
	}
	// Go raises the soft limit to the hard one at start: lower both.
	g := startGatewayCmd(t, exec.Command("sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" serve -config "$1"`, floodFDLimit), relayBin, config), addr)
	var out string // the log is written every 100 ms
	waitUntil(t, fmt.Sprintf("the bound derived from %d descriptors is 96", floodFDLimit), 10*time.Second, func() bool {
		out = g.output()
		return strings.Contains(out, `"max_connections":96`)
	}, &out)
	return g, slowSim
}

// floodKeys creates a funded account and three keys on it: the ordinary
// client's, one on the economy route, and the slow clients', which has a
// rate limit of its own.
func floodKeys(t *testing.T, addr string) (key, ecoKey, attackKey string) {
	t.Helper()
	cli(t, addr, "accounts", "create", "-account", "acme")
	cli(t, addr, "accounts", "credit", "-account", "acme", "-usd", "100")
	newKey := func(route string) string {
		k, _, _ := cli(t, addr, "keys", "create", "-account", "acme", "-route", route)
		return strings.TrimSpace(k)
	}
	return newKey("standard"), newKey("economy"), newKey("standard")
}

// postChat posts body to the chat endpoint with key k and reads the whole answer.
func postChat(client *http.Client, base, k, body string) (int, string, error) {
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+k)
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), err
}

// startLongStream starts a stream on the economy route (the slow provider)
// and waits until the provider has it; the channel gets its status, error
// and body once it ends.
func startLongStream(t *testing.T, client *http.Client, base, ecoKey string, slowSim *sim.Server) <-chan string {
	t.Helper()
	longStream := make(chan string, 1)
	go func() {
		status, out, err := postChat(client, base, ecoKey, `{"model":"modelf-flash","messages":[{"role":"user","content":"a long story"}],"stream":true}`)
		longStream <- fmt.Sprintf("%d %v %s", status, err, out)
	}()
	waitUntil(t, "the long stream starts", 20*time.Second, func() bool { return slowSim.Requests() >= 1 })
	return longStream
}

// checkLongStream wants the stream established before the flood to finish whole.
func checkLongStream(t *testing.T, longStream <-chan string) {
	t.Helper()
	select {
	case s := <-longStream:
		if !strings.HasPrefix(s, "200 <nil>") || !strings.Contains(s, "data: [DONE]") {
			t.Errorf("the stream established before the flood: %.300s", s)
		}
	case <-time.After(30 * time.Second):
		t.Error("the stream established before the flood did not finish")
	}
}

// gatewayFDs counts the gateway's open descriptors (Linux), 0 if unknown.
func gatewayFDs(g *gatewayProc) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", g.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	return len(ents)
}

// slowOutcome is how the gateway ended one slow client's connection.
type slowOutcome struct {
	Kind   int           // 0 slow headers, 1 slow body without a key, 2 slow body with a key
	Answer int           // the status read, 0 for a close without an answer
	Took   time.Duration // from the connection to the answer or the close
	Reset  bool          // the connection was reset before an answer was read
}

// floodResult is what the slow clients saw, as the child reports it.
type floodResult struct {
	Refused   int64         // answers 503 (the per-address or total bound)
	Resets    int64         // resets within a second, before any answer: refusals in a flood
	DialFails int64         // connections not made
	Outcomes  []slowOutcome // every other ending
}

// slowFlood is floodAttackers slow clients from floodAddresses loopback
// addresses, each sending a byte every floodGap and coming back a second
// after each refusal until the flood ends.
type slowFlood struct {
	addr      string
	heads     [3]string // the start of each kind's request
	stop      chan struct{}
	attack    sync.WaitGroup
	mu        sync.Mutex
	outcomes  []slowOutcome // all but the refusals
	refused   atomic.Int64
	resets    atomic.Int64
	dialFails atomic.Int64
	openConns sync.Map // net.Conn → struct{}: closed at the end
}

// startSlowFlood starts the slow clients against addr; those with a key use attackKey.
func startSlowFlood(addr, attackKey string) *slowFlood {
	f := &slowFlood{addr: addr, stop: make(chan struct{}), heads: [3]string{
		"POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nX-Slow: ",
		"POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
		"POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer " + attackKey + "\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
	}}
	for i := range floodAttackers {
		f.attack.Add(1)
		go f.attacker(i)
	}
	return f
}

// wait sleeps d; false if the flood ends first.
func (f *slowFlood) wait(d time.Duration) bool {
	select {
	case <-f.stop:
		return false
	case <-time.After(d):
		return true
	}
}

// attacker is slow client i, of kind i%3: it connects, trickles its
// request, records how the gateway ended it and comes back a second later.
func (f *slowFlood) attacker(i int) {
	defer f.attack.Done()
	kind := i % 3
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%floodAddresses))}, Timeout: 5 * time.Second}
	for {
		select {
		case <-f.stop:
			return
		default:
		}
		c, err := d.Dial("tcp", f.addr)
		if err != nil {
			f.dialFails.Add(1)
			if !f.wait(time.Second) {
				return
			}
			continue
		}
		o, cut := f.trickle(c, kind)
		if cut { // cut by the test, not by the gateway
			return
		}
		f.record(o)
		if !f.wait(time.Second) { // Retry-After: 1
			return
		}
	}
}

// trickle sends a request of kind on c a byte every floodGap and reads how
// the gateway ends it; cut is true when the flood ended first.
func (f *slowFlood) trickle(c net.Conn, kind int) (o slowOutcome, cut bool) {
	f.openConns.Store(c, struct{}{})
	start := time.Now()
	_, _ = io.WriteString(c, f.heads[kind])
	go func() { // a byte every gap until the connection fails or the test stops
		for f.wait(floodGap) {
			if _, err := c.Write([]byte{'a'}); err != nil {
				return
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	o = slowOutcome{Kind: kind, Took: time.Since(start)}
	if err == nil {
		o.Answer = resp.StatusCode
		_, _ = io.Copy(io.Discard, resp.Body)
	} else {
		o.Reset = errors.Is(err, syscall.ECONNRESET)
	}
	c.Close()
	f.openConns.Delete(c)
	select {
	case <-f.stop:
		return o, true
	default:
		return o, false
	}
}

// record counts a refusal (503), a quick reset before any answer (past
// the gateway's gentle refusals a refused connection is answered and
// closed at once, and the client's unread bytes turn the close into a
// reset that may overtake the answer), or keeps any other outcome.
func (f *slowFlood) record(o slowOutcome) {
	if o.Answer == http.StatusServiceUnavailable {
		f.refused.Add(1)
		return
	}
	if o.Answer == 0 && o.Reset && o.Took < time.Second {
		f.resets.Add(1)
		return
	}
	f.mu.Lock()
	f.outcomes = append(f.outcomes, o)
	f.mu.Unlock()
}

// end stops the slow clients, closes their connections and waits for them.
func (f *slowFlood) end() {
	close(f.stop)
	f.openConns.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
	f.attack.Wait()
}

// floodChildEnv, set to "ADDR KEY", makes the test binary the slow
// clients' process instead of running tests (see TestMain).
const floodChildEnv = "RELAY_TEST_SLOW_FLOOD"

// runFloodChild is the child's whole life: it starts the slow clients
// against the gateway at addr, says "started" on a line of its own, presses
// until its stdin closes, then writes its floodResult as JSON and exits.
func runFloodChild(spec string) int {
	addr, attackKey, ok := strings.Cut(spec, " ")
	if !ok {
		fmt.Fprintf(os.Stderr, "%s wants \"ADDR KEY\"\n", floodChildEnv)
		return 2
	}
	f := startSlowFlood(addr, attackKey)
	fmt.Println("started")
	_, _ = io.Copy(io.Discard, os.Stdin)
	f.end()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := json.NewEncoder(os.Stdout).Encode(floodResult{Refused: f.refused.Load(), Resets: f.resets.Load(), DialFails: f.dialFails.Load(), Outcomes: f.outcomes}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// floodChild is the slow clients' process, seen from the test.
type floodChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	done  bool
}

// startFloodChild starts the slow clients in a child process against the
// gateway at addr, those with a key using attackKey, and returns once they
// are pressing. The child is killed at cleanup if end was not reached.
func startFloodChild(t *testing.T, addr, attackKey string) *floodChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), floodChildEnv+"="+addr+" "+attackKey)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &floodChild{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(func() {
		if !f.done {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	if line, err := f.out.ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("the slow clients' process did not start: %q %v", line, err)
	}
	return f
}

// end stops the slow clients and reads what they saw.
func (f *floodChild) end(t *testing.T) floodResult {
	t.Helper()
	f.stdin.Close()
	var res floodResult
	err := json.NewDecoder(f.out).Decode(&res)
	f.done = true
	if werr := f.cmd.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		t.Fatalf("the slow clients' process: %v", err)
	}
	return res
}

// floodView is what the ordinary client saw during the flood.
type floodView struct {
	lat     []time.Duration // of each call
	maxOpen float64         // the most connections /metrics showed open
	maxFDs  int             // the most descriptors the gateway had open
}

// callThroughFlood makes ordinary calls for floodWindow, 50 ms apart, in
// turn a chat, a stream and /metrics; every one must answer 200.
func callThroughFlood(t *testing.T, client *http.Client, base, key string, g *gatewayProc) floodView {
	t.Helper()
	var v floodView
	floodEnd := time.Now().Add(floodWindow)
	for n := 0; time.Now().Before(floodEnd); n++ {
		t0 := time.Now()
		status, out, err := ordinaryCall(t, client, base, key, n, &v)
		v.lat = append(v.lat, time.Since(t0))
		v.maxFDs = max(v.maxFDs, gatewayFDs(g))
		if err != nil || status != 200 {
			t.Fatalf("ordinary call %d during the flood: %d %v %.300s", n, status, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return v
}

// ordinaryCall makes call n of the ordinary client: a chat, a whole stream
// or /metrics, whose open connections it notes in v.
func ordinaryCall(t *testing.T, client *http.Client, base, key string, n int, v *floodView) (status int, out string, err error) {
	switch n % 3 {
	case 0:
		return postChat(client, base, key, `{"model":"modelf-flash","messages":[{"role":"user","content":"hi"}],"max_tokens":16}`)
	case 1:
		status, out, err = postChat(client, base, key, `{"model":"modelf-flash","messages":[{"role":"user","content":"hi"}],"stream":true}`)
		if err == nil && !strings.Contains(out, "data: [DONE]") {
			err = errors.New("stream not finished")
		}
		return status, out, err
	default:
		var resp *http.Response
		req, _ := http.NewRequest("GET", base+"/metrics", nil)
		if resp, err = client.Do(req); err == nil {
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			status, out = resp.StatusCode, string(data)
			v.maxOpen = max(v.maxOpen, pageMetric(t, out, "relay_connections_open"))
		}
		return status, out, err
	}
}

// checkOrdinaryCalls wants the ordinary calls prompt, the gateway's
// descriptors and connections within their bounds, and most slow clients
// refused by the per-address bound.
func checkOrdinaryCalls(t *testing.T, v floodView, f floodResult, idleFDs int) {
	t.Helper()
	slices.Sort(v.lat)
	median, worst := v.lat[len(v.lat)/2], v.lat[len(v.lat)-1]
	t.Logf("%d ordinary calls during the flood: median %s, max %s; %d refusals, %d quick resets, %d dial failures; at most %.0f connections open, %d descriptors (%d before)",
		len(v.lat), median, worst, f.Refused, f.Resets, f.DialFails, v.maxOpen, v.maxFDs, idleFDs)
	if median > time.Second || worst > 10*time.Second {
		t.Errorf("ordinary calls slowed by the flood: median %s, max %s", median, worst)
	}
	if v.maxFDs >= floodFDLimit {
		t.Errorf("the gateway had %d descriptors open; its limit is %d", v.maxFDs, floodFDLimit)
	}
	if v.maxOpen > 96 {
		t.Errorf("%.0f connections open; the bound is 96", v.maxOpen)
	}
	if f.Refused < floodAttackers {
		t.Errorf("only %d refusals: the per-address bound should refuse most of %d clients", f.Refused, floodAttackers)
	}
}

// checkSlowClientsCut wants each kind of slow client admitted and cut off
// at its deadline: slow headers closed at the header timeout, a slow body
// without a key refused (401) at once, one with a key answered 408 at the
// body timeout.
func checkSlowClientsCut(t *testing.T, outcomes []slowOutcome) {
	t.Helper()
	var seen [3]int
	for _, o := range outcomes {
		seen[o.Kind]++
		switch {
		case o.Kind == 0 && (o.Answer != 0 || o.Took > floodHeaderTimeout+3*time.Second):
			t.Errorf("slow headers: answer %d after %s; want a close at %s", o.Answer, o.Took, floodHeaderTimeout)
		case o.Kind == 1 && (o.Answer != 401 || o.Took >= floodBodyTimeout):
			t.Errorf("slow body without a key: answer %d after %s; want 401 at once, before the body timeout %s", o.Answer, o.Took, floodBodyTimeout)
		case o.Kind == 2 && (o.Answer != 408 || o.Took > floodBodyTimeout+3*time.Second):
			t.Errorf("slow body with a key: answer %d after %s; want 408 at %s", o.Answer, o.Took, floodBodyTimeout)
		}
	}
	if seen[0] == 0 || seen[1] == 0 || seen[2] == 0 {
		t.Errorf("every kind of slow client should have been admitted and cut off: %v", seen)
	}
}

// checkResetsWereRefusals wants every refusal the slow clients saw, an
// answer 503 or a quick reset, counted by the gateway as a refused
// connection: a reset of a connection the gateway had admitted would push
// the clients' count past the gateway's.
func checkResetsWereRefusals(t *testing.T, client *http.Client, base string, f floodResult) {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var refused float64
	for _, m := range metricLine.FindAllStringSubmatch(string(data), -1) {
		if strings.HasPrefix(m[1], "relay_connections_refused_total{") {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			refused += v
		}
	}
	if seen := float64(f.Refused + f.Resets); seen > refused {
		t.Errorf("the slow clients saw %d answers 503 and %d quick resets, but the gateway refused only %.0f connections", f.Refused, f.Resets, refused)
	}
}

// waitFloodConnsGone waits up to 15 s for the flood's connections to be
// gone from the gateway: at most 4 open.
func waitFloodConnsGone(t *testing.T, client *http.Client, base string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if n := pageMetric(t, string(data), "relay_connections_open"); n <= 4 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%.0f connections still open after the flood", n)
		}
	}
}

var metricLine = regexp.MustCompile(`(?m)^(\S+) (\S+)$`)

// pageMetric reads an unlabelled series from a /metrics page.
func pageMetric(t *testing.T, page, name string) float64 {
	t.Helper()
	for _, m := range metricLine.FindAllStringSubmatch(page, -1) {
		if m[1] == name {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
