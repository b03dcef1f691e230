package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseTarget(t *testing.T) {
	cases := []struct {
		name string
		in   string
		ok   bool
	}{
		{"http", "http://127.0.0.1:9101", true},
		{"https with path", "https://example.test/base", true},
		{"no scheme", "127.0.0.1:9101", false},
		{"ftp", "ftp://127.0.0.1", false},
		{"no host", "http://", false},
		{"garbage", "http://[::1", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u, err := parseTarget(c.in)
			if c.ok != (err == nil) {
				t.Fatalf("parseTarget(%q) = %v, %v; want ok=%v", c.in, u, err, c.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "-target") {
				t.Fatalf("error %q does not name the flag", err)
			}
		})
	}
}

// TestProxyRelays checks the proxy forwards method, path, headers and body
// and returns the upstream's status and body unchanged.
func TestProxyRelays(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen", r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+string(body))
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, "upstream body")
	}))
	defer up.Close()
	target, err := parseTarget(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	px := httptest.NewServer(newHandler(target))
	defer px.Close()

	req, _ := http.NewRequest("POST", px.URL+"/v1/chat/completions", strings.NewReader(`{"x":1}`))
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTeapot || string(body) != "upstream body" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if got, want := resp.Header.Get("X-Seen"), `POST /v1/chat/completions Bearer sk-test {"x":1}`; got != want {
		t.Fatalf("upstream saw %q, want %q", got, want)
	}
}

// TestProxyFlushesEveryWrite checks a chunk reaches the client while the
// upstream is still writing: the streaming benchmark's TTFB depends on it.
func TestProxyFlushesEveryWrite(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "second\n")
	}))
	defer up.Close()
	defer close(release)
	target, _ := parseTarget(up.URL)
	px := httptest.NewServer(newHandler(target))
	defer px.Close()

	resp, err := http.Get(px.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(resp.Body).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if l != "first\n" {
			t.Fatalf("first line %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("first chunk not relayed while the upstream was still writing")
	}
}

// TestProxyReadsBodyAfterResponseStarts: an upstream may answer before it
// has read the whole request body (by a race, it always can: the proxy's
// transport checks for EOF after sending the last byte). The body must
// still reach it and the answer the client. Without full duplex the proxy's
// server, on starting the response, swallows what is left of the body and
// closes it (golang/go#40747): here the client, which sends the second half
// only once it has the response headers, would never get them.
func TestProxyReadsBodyAfterResponseStarts(t *testing.T) {
	const half = 32 << 10
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // respond before reading
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			return
		}
		fmt.Fprintf(w, "read %d", n)
	}))
	defer up.Close()
	target, _ := parseTarget(up.URL)
	px := httptest.NewServer(newHandler(target))
	defer px.Close()

	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", px.URL+"/upload", pr)
	req.ContentLength = 2 * half
	gotHeaders := make(chan struct{})
	go func() {
		_, _ = pw.Write(make([]byte, half))
		select {
		case <-gotHeaders:
			_, _ = pw.Write(make([]byte, half))
			_ = pw.Close()
		case <-time.After(10 * time.Second):
			_ = pw.CloseWithError(fmt.Errorf("no response headers"))
		}
	}()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("no response while the body was still being sent: %v", err)
	}
	defer resp.Body.Close()
	close(gotHeaders)
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != fmt.Sprintf("read %d", 2*half) {
		t.Fatalf("answer %q, %v", body, err)
	}
}
