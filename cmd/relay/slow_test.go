package main

import (
	"bufio"
	"bytes"
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
func TestSlowClientsCannotTakeTheGatewayDown(t *testing.T) {
	const (
		attackers     = 2000
		addresses     = 10 // 127.0.0.2 … 127.0.0.11
		perAddress    = 6
		fdLimit       = 256
		headerTimeout = 3 * time.Second
		bodyTimeout   = 4 * time.Second
		window        = 8 * time.Second
		gap           = 500 * time.Millisecond // between two bytes of a slow client
	)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < attackers+1000 {
		t.Fatalf("the test needs %d descriptors of its own; the limit is %d (%v)", attackers+1000, lim.Cur, err)
	}
	fast := httptest.NewServer(sim.New(sim.Options{}))
	defer fast.Close()
	slowSim := sim.New(sim.Options{Chunks: 48, ChunkGap: 250 * time.Millisecond}) // a 12 s stream
	slow := httptest.NewServer(slowSim)
	defer slow.Close()
	defer slowSim.Close()

	dir := t.TempDir()
	addr := freeAddr(t)
	config := writeConfig(t, dir, addr, fast.URL)
	text, _ := os.ReadFile(config)
	text = bytes.Replace(text, []byte("{name: eco, protocol: openai, base_url: "+fast.URL), []byte("{name: eco, protocol: openai, base_url: "+slow.URL), 1)
	text = fmt.Appendf(text, "server: {header_timeout: %s, body_timeout: %s, max_connections_per_address: %d}\n", headerTimeout, bodyTimeout, perAddress)
	if err := os.WriteFile(config, text, 0o600); err != nil {
		t.Fatal(err)
	}
	// Go raises the soft limit to the hard one at start: lower both.
	g := startGatewayCmd(t, exec.Command("sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" serve -config "$1"`, fdLimit), relayBin, config), addr)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(g.output(), `"max_connections":96`); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) { // the log is written every 100 ms
			t.Fatalf("the bound derived from %d descriptors should be 96:\n%s", fdLimit, g.output())
		}
	}

	cli(t, addr, "accounts", "create", "-account", "acme")
	cli(t, addr, "accounts", "credit", "-account", "acme", "-usd", "100")
	key, _, _ := cli(t, addr, "keys", "create", "-account", "acme", "-route", "standard")
	key = strings.TrimSpace(key)
	ecoKey, _, _ := cli(t, addr, "keys", "create", "-account", "acme", "-route", "economy")
	ecoKey = strings.TrimSpace(ecoKey)
	attackKey, _, _ := cli(t, addr, "keys", "create", "-account", "acme", "-route", "standard") // its own rate limit
	attackKey = strings.TrimSpace(attackKey)
	base := "http://" + addr
	// A new connection for every call: the gateway must go on accepting them.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	call := func(k, body string) (int, string, error) {
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

	// A stream established before the flood.
	longStream := make(chan string, 1)
	go func() {
		status, out, err := call(ecoKey, `{"model":"modelf-flash","messages":[{"role":"user","content":"a long story"}],"stream":true}`)
		longStream <- fmt.Sprintf("%d %v %s", status, err, out)
	}()
	for deadline := time.Now().Add(20 * time.Second); slowSim.Requests() < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the long stream did not start")
		}
	}

	fds := func() int { // the gateway's open descriptors (Linux)
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", g.cmd.Process.Pid))
		if err != nil {
			return 0
		}
		return len(ents)
	}
	idleFDs, maxFDs := fds(), 0

	// The flood.
	type outcome struct {
		kind   int           // 0 slow headers, 1 slow body without a key, 2 slow body with a key
		answer int           // the status read, 0 for a close without an answer
		took   time.Duration // from the connection to the answer or the close
	}
	var (
		stop      = make(chan struct{})
		attack    sync.WaitGroup
		mu        sync.Mutex
		outcomes  []outcome
		refused   atomic.Int64
		dialFails atomic.Int64
		openConns sync.Map // net.Conn → struct{}: closed at the end
	)
	heads := [3]string{
		"POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nX-Slow: ",
		"POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
		"POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer " + attackKey + "\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
	}
	wait := func(d time.Duration) bool {
		select {
		case <-stop:
			return false
		case <-time.After(d):
			return true
		}
	}
	for i := range attackers {
		attack.Add(1)
		go func() {
			defer attack.Done()
			kind := i % 3
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%addresses))}, Timeout: 5 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := d.Dial("tcp", addr)
				if err != nil {
					dialFails.Add(1)
					if !wait(time.Second) {
						return
					}
					continue
				}
				openConns.Store(c, struct{}{})
				start := time.Now()
				_, _ = io.WriteString(c, heads[kind])
				go func() { // a byte every gap until the connection fails or the test stops
					for wait(gap) {
						if _, err := c.Write([]byte{'a'}); err != nil {
							return
						}
					}
				}()
				_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				o := outcome{kind: kind, took: time.Since(start)}
				if err == nil {
					o.answer = resp.StatusCode
					_, _ = io.Copy(io.Discard, resp.Body)
				}
				c.Close()
				openConns.Delete(c)
				select {
				case <-stop: // cut by the test, not by the gateway
					return
				default:
				}
				if o.answer == http.StatusServiceUnavailable {
					refused.Add(1)
				} else {
					mu.Lock()
					outcomes = append(outcomes, o)
					mu.Unlock()
				}
				if !wait(time.Second) { // Retry-After: 1
					return
				}
			}
		}()
	}

	// Ordinary calls while the flood goes on.
	var lat []time.Duration
	maxOpen := 0.0
	floodEnd := time.Now().Add(window)
	for n := 0; time.Now().Before(floodEnd); n++ {
		t0 := time.Now()
		var status int
		var out string
		var err error
		switch n % 3 {
		case 0:
			status, out, err = call(key, `{"model":"modelf-flash","messages":[{"role":"user","content":"hi"}],"max_tokens":16}`)
		case 1:
			status, out, err = call(key, `{"model":"modelf-flash","messages":[{"role":"user","content":"hi"}],"stream":true}`)
			if err == nil && !strings.Contains(out, "data: [DONE]") {
				err = errors.New("stream not finished")
			}
		case 2:
			var resp *http.Response
			req, _ := http.NewRequest("GET", base+"/metrics", nil)
			if resp, err = client.Do(req); err == nil {
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				status, out = resp.StatusCode, string(data)
				maxOpen = max(maxOpen, pageMetric(t, out, "relay_connections_open"))
			}
		}
		lat = append(lat, time.Since(t0))
		maxFDs = max(maxFDs, fds())
		if err != nil || status != 200 {
			t.Fatalf("ordinary call %d during the flood: %d %v %.300s", n, status, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	openConns.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
	attack.Wait()

	slices.Sort(lat)
	median, worst := lat[len(lat)/2], lat[len(lat)-1]
	t.Logf("%d ordinary calls during the flood: median %s, max %s; %d refusals, %d dial failures; at most %.0f connections open, %d descriptors (%d before)",
		len(lat), median, worst, refused.Load(), dialFails.Load(), maxOpen, maxFDs, idleFDs)
	if median > time.Second || worst > 10*time.Second {
		t.Errorf("ordinary calls slowed by the flood: median %s, max %s", median, worst)
	}
	if maxFDs >= fdLimit {
		t.Errorf("the gateway had %d descriptors open; its limit is %d", maxFDs, fdLimit)
	}
	if maxOpen > 96 {
		t.Errorf("%.0f connections open; the bound is 96", maxOpen)
	}
	if refused.Load() < attackers {
		t.Errorf("only %d refusals: the per-address bound should refuse most of %d clients", refused.Load(), attackers)
	}
	// Each kind of slow client was cut off at its deadline.
	var seen [3]int
	for _, o := range outcomes {
		seen[o.kind]++
		switch {
		case o.kind == 0 && (o.answer != 0 || o.took > headerTimeout+3*time.Second):
			t.Errorf("slow headers: answer %d after %s; want a close at %s", o.answer, o.took, headerTimeout)
		case o.kind == 1 && (o.answer != 401 || o.took > 3*time.Second):
			t.Errorf("slow body without a key: answer %d after %s; want 401 at once", o.answer, o.took)
		case o.kind == 2 && (o.answer != 408 || o.took > bodyTimeout+3*time.Second):
			t.Errorf("slow body with a key: answer %d after %s; want 408 at %s", o.answer, o.took, bodyTimeout)
		}
	}
	if seen[0] == 0 || seen[1] == 0 || seen[2] == 0 {
		t.Errorf("every kind of slow client should have been admitted and cut off: %v", seen)
	}

	select {
	case s := <-longStream:
		if !strings.HasPrefix(s, "200 <nil>") || !strings.Contains(s, "data: [DONE]") {
			t.Errorf("the stream established before the flood: %.300s", s)
		}
	case <-time.After(30 * time.Second):
		t.Error("the stream established before the flood did not finish")
	}
	if strings.Contains(g.output(), "too many open files") {
		t.Errorf("the gateway ran out of descriptors:\n%s", tail(g.output(), 2000))
	}
	// The flood's connections are gone from the gateway.
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
