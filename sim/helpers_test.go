package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// newTestServer starts s on a loopback httptest server.
func newTestServer(t *testing.T, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	return serve(t, New(opts))
}

// newClockServer is newTestServer with a fake clock.
func newClockServer(t *testing.T, opts Options) (*Server, *httptest.Server, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	s := New(opts)
	s.now = clk.now
	s, ts := serve(t, s)
	return s, ts, clk
}

func serve(t *testing.T, s *Server) (*Server, *httptest.Server) {
	t.Helper()
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return s, ts
}

// call sends one request and returns the status, headers and whole body.
func call(t *testing.T, ts *httptest.Server, method, path, body string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	resp := do(t, context.Background(), ts, method, path, body, hdr)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, b
}

func do(t *testing.T, ctx context.Context, ts *httptest.Server, method, path, body string, hdr map[string]string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

var anthropicHdr = map[string]string{"anthropic-version": "2023-06-01"}

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	name string
	data string
}

// readSSE parses an event stream until EOF or an error, which it returns
// (a cut stream ends in an error). Every data line must be JSON or [DONE].
func readSSE(t *testing.T, r io.Reader) ([]sseEvent, error) {
	t.Helper()
	var evs []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" || cur.name != "" {
				if cur.data != "[DONE]" && !json.Valid([]byte(cur.data)) {
					t.Fatalf("event %q: data is not JSON: %s", cur.name, cur.data)
				}
				evs = append(evs, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if cur.data != "" || cur.name != "" {
		t.Fatalf("stream ended inside an event: %+v", cur)
	}
	return evs, sc.Err()
}

// postStream posts body and parses the event stream.
func postStream(t *testing.T, ts *httptest.Server, path, body string, hdr map[string]string) ([]sseEvent, error) {
	t.Helper()
	resp := do(t, context.Background(), ts, http.MethodPost, path, body, hdr)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: status %d: %s", path, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("POST %s: Content-Type %q", path, ct)
	}
	return readSSE(t, resp.Body)
}

// decode unmarshals JSON or fails the test.
func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

// fakeClock is a settable clock for the video schedule and cache ttl.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// errBody is the OpenAI error shape.
type errBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// anthErrBody is the Anthropic error shape.
type anthErrBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}
