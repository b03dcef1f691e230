package listen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/internal/testwait"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testID() string { return "req_test" }

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

// errBody checks that data is the error body of docs/api.md#errors.
func errBody(t testing.TB, data []byte) {
	t.Helper()
	var b struct {
		Error *struct {
			Message *string `json:"message"`
			Type    *string `json:"type"`
			Code    any     `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &b); err != nil || b.Error == nil || b.Error.Message == nil || b.Error.Type == nil {
		t.Fatalf("not the error body (docs/api.md#errors): %s", data)
	}
}

// Many connections opened and closed at once, each closed twice by the
// server: the bound holds at every moment, every connection is either
// admitted or refused, and the counts end at zero (run with -race).
func TestConnectionCountsConcurrent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const max, perAddr, clients, dials = 8, 5, 16, 20
	b := New(config.Config{Server: config.ServerConfig{MaxConnections: max, MaxConnectionsPerAddress: perAddr}, SupportEmail: "help@relay.test"}, discardLogger(), testID)
	l := &boundedListener{Listener: ln, b: b}
	var admitted, live, peak atomic.Int64
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			admitted.Add(1)
			n := live.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(io.Discard, c) // until the client closes
				live.Add(-1)
				var cw sync.WaitGroup
				for range 2 {
					cw.Add(1)
					go func() { defer cw.Done(); c.Close() }()
				}
				cw.Wait()
			}()
		}
	}()
	var cl sync.WaitGroup
	for i := range clients {
		cl.Add(1)
		go func() {
			defer cl.Done()
			local := fmt.Sprintf("127.0.0.%d", 2+i%4)
			for range dials {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
				c, err := d.Dial("tcp", ln.Addr().String())
				if err != nil {
					t.Error(err)
					return
				}
				_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
				_, _ = c.Read(make([]byte, 1))
				c.Close()
			}
		}()
	}
	cl.Wait()
	testwait.For(t, 15*time.Second, "every dial accepted or refused", func() bool {
		return admitted.Load()+int64(b.refusedTotal.Load()+b.refusedAddr.Load()) == clients*dials
	})
	ln.Close()
	wg.Wait()
	if open, addrs := b.Open(); open != 0 || addrs != 0 {
		t.Fatalf("after every close: %d open, %d addresses counted", open, addrs)
	}
	if p := peak.Load(); p > max {
		t.Fatalf("%d connections were open at once; the bound is %d", p, max)
	}
	t.Logf("admitted %d, refused %d (total) + %d (per address)", admitted.Load(), b.refusedTotal.Load(), b.refusedAddr.Load())
}

func TestPlainError(t *testing.T) {
	const h = plainHeaders
	for _, tc := range []struct {
		in     string
		status int
		detail string
		ok     bool
	}{
		{"HTTP/1.1 431 Request Header Fields Too Large" + h + "431 Request Header Fields Too Large", 431, "", true},
		{"HTTP/1.1 400 Bad Request" + h + "400 Bad Request", 400, "", true},
		{"HTTP/1.1 400 Bad Request: missing required Host header" + h + "400 Bad Request: missing required Host header", 400, "missing required Host header", true},
		{"HTTP/1.1 505 HTTP Version Not Supported: unsupported protocol version" + h + "505 HTTP Version Not Supported: unsupported protocol version", 505, "unsupported protocol version", true},
		{"HTTP/1.1 501 Not Implemented" + h + "Unsupported transfer encoding", 501, "", true},
		{"HTTP/1.1 400 Bad Request" + h + "400 Bad Request and more", 0, "", false},
		{"HTTP/1.1 400 Bad Request" + h + "Unsupported transfer encoding", 0, "", false},
		{"HTTP/1.1 401 Bad Request" + h + "401 Bad Request", 0, "", false},
		{"HTTP/1.1 400 Bad Requestx" + h + "400 Bad Requestx", 0, "", false},
		{"HTTP/1.1 200 OK" + h + "200 OK", 0, "", false},
		{"HTTP/1.0 400 Bad Request" + h + "400 Bad Request", 0, "", false},
		{"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nDate: x\r\n\r\n400 Bad Request", 0, "", false},
		{"HTTP/1.1 400 Bad Request" + h[:len(h)-2], 0, "", false},
		{"HTTP/1.1 4", 0, "", false},
	} {
		status, detail, ok := plainError([]byte(tc.in))
		if status != tc.status || detail != tc.detail || ok != tc.ok {
			t.Errorf("plainError(%q) = %d, %q, %v", tc.in, status, detail, ok)
		}
	}
}

// FuzzPlainError: never panics; whatever it recognises is an error status
// that starts the write, and its replacement is a well-formed response in
// the error shape (docs/api.md#errors) with the same status.
func FuzzPlainError(f *testing.F) {
	f.Add([]byte("HTTP/1.1 431 Request Header Fields Too Large" + plainHeaders + "431 Request Header Fields Too Large"))
	f.Add([]byte("HTTP/1.1 400 Bad Request: invalid header name" + plainHeaders + "400 Bad Request: invalid header name"))
	f.Add([]byte("HTTP/1.1 501 Not Implemented" + plainHeaders + "Unsupported transfer encoding"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"))
	f.Add([]byte("HTTP/1.1 4"))
	b := New(config.Config{SupportEmail: "help@relay.test"}, discardLogger(), testID)
	f.Fuzz(func(t *testing.T, p []byte) {
		status, detail, ok := plainError(p)
		if !ok {
			return
		}
		if status < 400 || status > 599 || !bytes.HasPrefix(p, []byte(fmt.Sprintf("HTTP/1.1 %d ", status))) {
			t.Fatalf("recognised %q as %d", p, status)
		}
		out := b.answer(plainErrorOf(status, detail), "req_fuzz")
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
		if err != nil {
			t.Fatalf("replacement is not HTTP: %v\n%s", err, out)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != status || !resp.Close {
			t.Fatalf("replacement %d close %v", resp.StatusCode, resp.Close)
		}
		errBody(t, body)
	})
}

func TestRemoteIP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if ip := remoteIP(a); ip.IsValid() {
		t.Fatalf("a pipe has no address: %v", ip)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := dialFrom(t, "127.0.0.7", ln.Addr().String())
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ip := remoteIP(s); ip != netip.MustParseAddr("127.0.0.7") {
		t.Fatalf("remoteIP = %v", ip)
	}
	_ = c
}

// TestRetryHintsOnConnectionRefusal: the listener's canned 503 carries the
// hints too.
func TestRetryHintsOnConnectionRefusal(t *testing.T) {
	b := New(config.Config{SupportEmail: "help@relay.test", Server: config.ServerConfig{MaxConnections: 1}}, discardLogger(), testID)
	out := b.answer(apierr.Refusal("too_many_connections", 1, "full"), "req_x")
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	errBody(t, body)
	if resp.Header.Get("X-Should-Retry") != "true" {
		t.Errorf("x-should-retry %q", resp.Header.Get("X-Should-Retry"))
	}
	if resp.Header.Get("Retry-After") != "1" || resp.Header.Get("Retry-After-Ms") != "1000" {
		t.Errorf("Retry-After %q, retry-after-ms %q", resp.Header.Get("Retry-After"), resp.Header.Get("Retry-After-Ms"))
	}
}
