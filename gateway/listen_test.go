package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/internal/testwait"
	"github.com/modelrelay/modelrelay/sim"
)

func withServer(s config.ServerConfig) envOption { return func(c *config.Config) { c.Server = s } }

// dialFrom connects to addr from the loopback address local (127.0.0.x:
// Linux routes all of 127/8 to the loopback interface).
func dialFrom(t testing.TB, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readAnswer reads one response from c, within d.
func readAnswer(c net.Conn, br *bufio.Reader, d time.Duration) (*http.Response, []byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, body, err
}

// checkErrorAnswer checks the error shape (docs/api.md#errors) and the headers every
// answer of this file carries, and returns the error code.
func checkErrorAnswer(t *testing.T, resp *http.Response, body []byte, status int) any {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, body)
	}
	msg, typ, code := errBody(t, body)
	rid := resp.Header.Get("X-Request-Id")
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if !strings.HasPrefix(rid, "req_") || !strings.HasSuffix(msg, "quote request id "+rid) || !strings.Contains(msg, "help@relay.test") {
		t.Errorf("message %q does not end with the request id %q and name the support address", msg, rid)
	}
	if typ == "" {
		t.Error("empty type")
	}
	return code
}

// roundTrip sends a GET /healthz on c and wants 200: the connection is open
// and served.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, body, err := readAnswer(c, br, 10*time.Second)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz on an admitted connection: %v %v %s", resp, err, body)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Past a bound a new connection gets a 503 in the error shape (docs/api.md#errors) at once, and
// is closed; connections already open are served; the counts go back down
// when connections close, and /metrics shows them.
func TestConnectionBounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withServer(config.ServerConfig{MaxConnections: 3, MaxConnectionsPerAddress: 2}))
	addr := e.srv.Listener.Addr().String()
	type client struct {
		c  net.Conn
		br *bufio.Reader
	}
	open := func(local string) client {
		c := dialFrom(t, local, addr)
		return client{c, bufio.NewReader(c)}
	}
	refused := func(cl client, wantCode string) {
		t.Helper()
		start := time.Now()
		resp, body, err := readAnswer(cl.c, cl.br, 10*time.Second)
		if err != nil {
			t.Fatalf("want a 503 at once: %v", err)
		}
		if code := checkErrorAnswer(t, resp, body, 503); code != wantCode {
			t.Errorf("code %v, want %s", code, wantCode)
		}
		if resp.Header.Get("Retry-After") != "1" || !resp.Close {
			t.Errorf("headers: %v", resp.Header)
		}
		if _, err := cl.br.ReadByte(); err != io.EOF {
			t.Errorf("the refused connection is not closed: %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the refusal took %s", d)
		}
	}
	a1, a2 := open("127.0.0.2"), open("127.0.0.2")
	roundTrip(t, a1.c, a1.br)
	roundTrip(t, a2.c, a2.br)
	refused(open("127.0.0.2"), "too_many_connections_from_address")
	b1 := open("127.0.0.3")
	roundTrip(t, b1.c, b1.br)
	refused(open("127.0.0.4"), "too_many_connections")
	// The connections admitted are untouched by the refusals.
	roundTrip(t, a1.c, a1.br)

	if _, err := io.WriteString(b1.c, "GET /metrics HTTP/1.1\r\nHost: relay\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, body, err := readAnswer(b1.c, b1.br, 10*time.Second)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("metrics: %v %v", resp, err)
	}
	for _, want := range []string{"relay_connections_open 3", `relay_connections_refused_total{reason="per_address"} 1`, `relay_connections_refused_total{reason="total"} 1`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	a1.c.Close()
	testwait.For(t, 15*time.Second, "the closed connection is uncounted", func() bool { n, _ := e.gw.conns.Open(); return n == 2 })
	c2 := open("127.0.0.4")
	roundTrip(t, c2.c, c2.br)
	a2.c.Close()
	testwait.For(t, 15*time.Second, "the closed connection is uncounted", func() bool { n, _ := e.gw.conns.Open(); return n == 2 })
	a3 := open("127.0.0.2")
	roundTrip(t, a3.c, a3.br)
	for _, c := range []client{b1, c2, a3} {
		c.c.Close()
	}
	testwait.For(t, 15*time.Second, "every connection uncounted", func() bool { n, a := e.gw.conns.Open(); return n == 0 && a == 0 })
}

// An HTTP client whose connection is refused reads the 503, whatever the
// size of the body it is sending, rather than a reset or an unsolicited
// answer (when refusals are not a flood: see refuse).
func TestRefusalReachesClients(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withServer(config.ServerConfig{MaxConnections: 1}))
	addr := e.srv.Listener.Addr().String()
	holder := dialFrom(t, "127.0.0.2", addr)
	roundTrip(t, holder, bufio.NewReader(holder))
	for _, size := range []int{0, 100, 64 << 10, 1 << 20} {
		for range 5 {
			testwait.For(t, 15*time.Second, "no refusal under way", func() bool { return e.gw.conns.Refusing() == 0 })
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := client.Post(e.url+"/v1/chat/completions", "application/json", bytes.NewReader(bytes.Repeat([]byte{'x'}, size)))
			if err != nil {
				t.Fatalf("body of %d bytes: %v", size, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if code := checkErrorAnswer(t, resp, body, 503); code != "too_many_connections" {
				t.Fatalf("code %v", code)
			}
		}
	}
}

// trickle writes one byte of b every gap until it is written or the
// connection fails; it returns when that happens or stop is closed.
func trickle(c net.Conn, b []byte, gap time.Duration, stop <-chan struct{}) {
	for i := range b {
		select {
		case <-stop:
			return
		case <-time.After(gap):
		}
		if _, err := c.Write(b[i : i+1]); err != nil {
			return
		}
	}
}

// A client that sends its body a byte at a time without a valid key gets
// its 401 (or 404 for no endpoint) at once, and the connection is closed
// at once: nothing waits for its body.
func TestTrickledBodyWithoutKeyIsAnsweredAndClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addr := e.srv.Listener.Addr().String()
	for _, tc := range []struct {
		name, head string
		status     int
	}{
		{"no key", "POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nContent-Length: 1000\r\n\r\n", 401},
		{"invalid key", "POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer sk-nope\r\nContent-Length: 1000\r\n\r\n", 401},
		{"chunked", "POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nTransfer-Encoding: chunked\r\n\r\n", 401},
		{"expect 100-continue", "POST /v1/responses HTTP/1.1\r\nHost: relay\r\nExpect: 100-continue\r\nContent-Length: 1000\r\n\r\n", 401},
		{"admin", "POST /admin/accounts HTTP/1.1\r\nHost: relay\r\nContent-Length: 1000\r\n\r\n", 401},
		{"no endpoint", "POST /v1/nothing HTTP/1.1\r\nHost: relay\r\nContent-Length: 1000\r\n\r\n", 404},
		{"wrong method", "PUT /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nContent-Length: 1000\r\n\r\n", 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialFrom(t, "127.0.0.1", addr)
			br := bufio.NewReader(c)
			start := time.Now()
			if _, err := io.WriteString(c, tc.head+"{"); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			go trickle(c, bytes.Repeat([]byte{' '}, 999), 50*time.Millisecond, stop)
			resp, body, err := readAnswer(c, br, 10*time.Second)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			checkErrorAnswer(t, resp, body, tc.status)
			if !resp.Close {
				t.Error("the answer does not close the connection")
			}
			// The server closes: EOF (or a reset, once it closes over the
			// bytes still arriving) while the client is still sending.
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := br.ReadByte(); err == nil || errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
				t.Fatalf("the connection was not closed: %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("answer and close took %s; the body would take 50s", d)
			}
		})
	}
	testwait.For(t, 15*time.Second, "every connection closed and uncounted", func() bool { n, _ := e.gw.conns.Open(); return n == 0 })
}

// An ordinary HTTP client sending a body with an invalid key reads the 401,
// whatever the body's size: the connection closes after the answer without
// resetting it under the client.
func TestUnreadBodyAnswerReachesClients(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, size := range []int{100, 100 << 10, 1 << 20, 4 << 20} {
		for range 5 {
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", bytes.NewReader(bytes.Repeat([]byte{' '}, size)))
			req.Header.Set("Authorization", "Bearer sk-invalid")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("body of %d bytes: %v", size, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if code := checkErrorAnswer(t, resp, body, 401); code != "invalid_api_key" {
				t.Fatalf("code %v", code)
			}
		}
	}
}

// A keyed client whose body does not arrive within server.body_timeout is
// answered 408 body_timeout and the connection closed; nothing is held or
// charged.
func TestBodyTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withServer(config.ServerConfig{HeaderTimeout: time.Second, BodyTimeout: 2 * time.Second, MaxConnectionsPerAddress: -1}))
	e.account("slow", "1")
	key := e.key("slow", "economy")
	before := e.balance("slow")
	c := dialFrom(t, "127.0.0.1", e.srv.Listener.Addr().String())
	br := bufio.NewReader(c)
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", key)
	stop := make(chan struct{})
	defer close(stop)
	go trickle(c, bytes.Repeat([]byte{' '}, 999), 100*time.Millisecond, stop)
	resp, body, err := readAnswer(c, br, 20*time.Second)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	took := time.Since(start)
	if code := checkErrorAnswer(t, resp, body, 408); code != "body_timeout" {
		t.Fatalf("code %v", code)
	}
	if took < 1500*time.Millisecond || took > 10*time.Second {
		t.Errorf("answered after %s; the deadline is 2s", took)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err == nil || isTimeout(err) {
		t.Fatalf("the connection was not closed: %v", err)
	}
	after := e.balance("slow")
	if after.Balance != before.Balance || after.Held != 0 {
		t.Fatalf("balance %v held %v after a body timeout; before %v", after.Balance, after.Held, before.Balance)
	}
	if n := e.gw.bill.OpenHolds(); n != 0 {
		t.Fatalf("%d holds open", n)
	}
}

// A client that sends its headers a byte at a time is cut off at
// server.header_timeout: answered 408 header_timeout if its request line is
// still incomplete, closed without an answer if only headers are missing
// (net/http answers nothing then).
func TestHeaderTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withServer(config.ServerConfig{HeaderTimeout: time.Second, BodyTimeout: 30 * time.Second, MaxConnectionsPerAddress: -1}))
	for _, tc := range []struct {
		name, first, rest string
		answer            bool
	}{
		{"request line", "", "GET /v1/models HTTP/1.1\r\nHost: relay\r\n" + strings.Repeat("X-A: b\r\n", 100), true},
		{"headers", "GET /v1/models HTTP/1.1\r\n", "Host: relay\r\n" + strings.Repeat("X-A: b\r\n", 100), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialFrom(t, "127.0.0.1", e.srv.Listener.Addr().String())
			br := bufio.NewReader(c)
			start := time.Now()
			io.WriteString(c, tc.first)
			stop := make(chan struct{})
			defer close(stop)
			go trickle(c, []byte(tc.rest), 50*time.Millisecond, stop)
			if tc.answer {
				resp, body, err := readAnswer(c, br, 20*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if code := checkErrorAnswer(t, resp, body, 408); code != "header_timeout" {
					t.Fatalf("code %v", code)
				}
			}
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			if b, err := br.ReadByte(); err == nil || isTimeout(err) {
				t.Fatalf("want the connection closed: %q, %v", b, err)
			}
			if d := time.Since(start); d < 900*time.Millisecond || d > 10*time.Second {
				t.Fatalf("closed after %s; the deadline is 1s", d)
			}
		})
	}
	testwait.For(t, 15*time.Second, "every connection uncounted", func() bool { n, _ := e.gw.conns.Open(); return n == 0 })
}

// A stream that lasts longer than server.body_timeout is not cut by it, nor
// is the kept-alive connection that carried it.
func TestStreamOutlivesBodyTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withServer(config.ServerConfig{HeaderTimeout: 500 * time.Millisecond, BodyTimeout: 500 * time.Millisecond, MaxConnectionsPerAddress: -1}))
	e.sims["eco-a"].SetOptions(sim.Options{Chunks: 8, ChunkGap: 250 * time.Millisecond})
	e.account("long", "1")
	key := e.key("long", "economy")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	call := func(stream bool) string {
		body := chatBody("modelf-flash", "a long story", fmt.Sprintf(`"stream":%v`, stream))
		req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d, %v: %s", resp.StatusCode, err, data)
		}
		return string(data)
	}
	start := time.Now()
	if out := call(true); !strings.Contains(out, "data: [DONE]") {
		t.Fatalf("the stream was cut: %s", out)
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("the stream took %s: too short to test the deadline", d)
	}
	e.sims["eco-a"].SetOptions(sim.Options{})
	call(false) // on the same kept-alive connection
	if n, _ := e.gw.conns.Open(); n != 1 {
		t.Errorf("%d connections open; the client should have kept and reused one", n)
	}
}

// net/http's own errors (431, 400, 501, 505, 417) come in the error shape (docs/api.md#errors).
func TestPlainErrorsInSpecShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addr := e.srv.Listener.Addr().String()
	for _, tc := range []struct {
		name, req string
		status    int
		code      string
		says      string
	}{
		{"headers too large", "GET /v1/models HTTP/1.1\r\nHost: relay\r\nX-Big: " + strings.Repeat("a", 1<<20+8192) + "\r\n\r\n", 431, "request_headers_too_large", "headers are larger"},
		{"malformed Content-Length", "POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nContent-Length: 12abc\r\n\r\n", 400, "malformed_request", "Content-Length"},
		{"two Content-Lengths", "POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, "malformed_request", "not valid HTTP/1.1"},
		{"no Host", "GET /v1/models HTTP/1.1\r\n\r\n", 400, "malformed_request", "missing required Host header"},
		{"transfer encoding", "POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "unsupported_transfer_encoding", "Transfer-Encoding"},
		{"HTTP/2 request line", "GET /v1/models HTTP/2.0\r\nHost: relay\r\n\r\n", 505, "http_version_not_supported", "HTTP/1.x"},
		{"unknown expectation", "POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\n{}", 417, "expectation_failed", "100-continue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialFrom(t, "127.0.0.1", addr)
			br := bufio.NewReader(c)
			go io.WriteString(c, tc.req) // a large one is still being written when the answer comes
			resp, body, err := readAnswer(c, br, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if code := checkErrorAnswer(t, resp, body, tc.status); code != tc.code {
				t.Errorf("code %v, want %s", code, tc.code)
			}
			if msg, _, _ := errBody(t, body); !strings.Contains(msg, tc.says) {
				t.Errorf("message %q does not say %q", msg, tc.says)
			}
			if !resp.Close || resp.ContentLength != int64(len(body)) {
				t.Errorf("Connection close %v, Content-Length %d for %d bytes", resp.Close, resp.ContentLength, len(body))
			}
		})
	}
}

// A handler's own answer that looks like one of net/http's is left alone:
// only what net/http writes to the connection itself is rewritten.
func TestHandlerAnswersAreNotRewritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Connection", "close")
		w.WriteHeader(400)
		io.WriteString(w, "400 Bad Request")
	})}
	e.gw.ConfigureServer(srv)
	go srv.Serve(e.gw.Listener(ln))
	defer srv.Close()
	c := dialFrom(t, "127.0.0.1", ln.Addr().String())
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: relay\r\n\r\n")
	resp, body, err := readAnswer(c, bufio.NewReader(c), 10*time.Second)
	if err != nil || resp.StatusCode != 400 || string(body) != "400 Bad Request" || resp.Header.Get("X-Request-Id") != "" {
		t.Fatalf("the handler's answer was changed: %v %v %q", resp, err, body)
	}
}
