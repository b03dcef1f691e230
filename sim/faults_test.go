package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/internal/testwait"
)

const (
	chatBody     = `{"model":"modelf-flash","messages":[{"role":"user","content":"hi"}]}`
	chatStream   = `{"model":"modelf-flash","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	respStream   = `{"model":"modelc-4.7","stream":true,"input":"hi"}`
	msgBody      = `{"model":"modela-opus-5-5","max_tokens":30,"messages":[{"role":"user","content":"hi"}]}`
	msgStream    = `{"model":"modela-opus-5-5","max_tokens":30,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	videoBody    = `{"model":"modelc-imagine-video-1.5","prompt":"a cat"}`
	imageBody    = `{"model":"modelb-image-2.5-flare","prompt":"a cat"}`
	systemOneReq = `{"model":"sysmodel-latest","state":"s","questions":{"q":{"type":"noul"}}}`
)

func TestFaultStatus(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		opts       Options
		path, body string
		hdr        map[string]string
		status     int
		typ, msg   string
		retryAfter string
	}{
		{"500 default with a rate", Options{ErrorRate: 1}, "/v1/chat/completions", chatBody, nil, 500, "server_error", "simulated", ""},
		{"503 alone faults every request", Options{Status: 503}, "/v1/responses", respStream, nil, 503, "server_error", "overloaded", ""},
		{"429 with Retry-After", Options{Status: 429, RetryAfter: 7}, "/v1/images/generations", imageBody, nil, 429, "requests", "Rate limit", "7"},
		{"429 default Retry-After", Options{Status: 429}, "/v1/systemone", systemOneReq, nil, 429, "requests", "Rate limit", "1"},
		{"messages 503 in Anthropic shape", Options{Status: 503}, "/v1/messages", msgBody, anthropicHdr, 503, "overloaded_error", "overloaded", ""},
		{"messages 529", Options{Status: 529}, "/v1/messages", msgBody, anthropicHdr, 529, "overloaded_error", "overloaded", ""},
		{"messages 429", Options{Status: 429, RetryAfter: 3}, "/v1/messages", msgBody, anthropicHdr, 429, "rate_limit_error", "Rate limit", "3"},
		{"messages 500", Options{Status: 500}, "/v1/messages", msgBody, anthropicHdr, 500, "api_error", "simulated", ""},
		{"video create", Options{Status: 502}, "/v1/videos/generations", videoBody, nil, 502, "server_error", "simulated", ""},
		{"video poll", Options{Status: 500}, "/v1/videos/vid_x", "", nil, 500, "server_error", "simulated", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := newTestServer(t, tc.opts)
			method := http.MethodPost
			if tc.body == "" {
				method = http.MethodGet
			}
			status, hdr, b := call(t, ts, method, tc.path, tc.body, tc.hdr)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			if got := hdr.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
			}
			var typ, msg string
			if tc.path == "/v1/messages" {
				e := decode[anthErrBody](t, b)
				if e.Type != "error" {
					t.Errorf("not an Anthropic error: %s", b)
				}
				typ, msg = e.Error.Type, e.Error.Message
			} else {
				e := decode[errBody](t, b)
				typ, msg = e.Error.Type, e.Error.Message
			}
			if typ != tc.typ || !strings.Contains(msg, tc.msg) {
				t.Errorf("error type %q message %q, want %q containing %q", typ, msg, tc.typ, tc.msg)
			}
		})
	}
}

func TestFaultsSpareModelsAndAuth(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{Status: 500, APIKey: "sk-sim"})
	if status, _, b := call(t, ts, http.MethodGet, "/v1/models", "", map[string]string{"Authorization": "Bearer sk-sim"}); status != 200 {
		t.Errorf("models under faults: %d %s", status, b)
	}
	if status, _, _ := call(t, ts, http.MethodPost, "/v1/chat/completions", chatBody, nil); status != 401 {
		t.Errorf("no key under faults: %d, want 401 first", status)
	}
}

func TestErrorRateIsExact(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		rate   float64
		n      int
		faults []int
	}{
		{"half", 0.5, 10, []int{1, 3, 5, 7, 9}},
		{"a third", 1.0 / 3, 9, []int{2, 5, 8}},
		{"a tenth", 0.1, 20, []int{9, 19}},
		{"all", 1, 4, []int{0, 1, 2, 3}},
		{"none", 0, 4, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{ErrorRate: tc.rate, Status: 503}
			if tc.rate == 0 {
				opts = Options{} // Status alone would fault every request
			}
			s, ts := newTestServer(t, opts)
			var got []int
			for i := 0; i < tc.n; i++ {
				status, _, b := call(t, ts, http.MethodPost, "/v1/chat/completions", chatBody, nil)
				switch status {
				case 503:
					got = append(got, i)
				case 200:
				default:
					t.Fatalf("request %d: status %d %s", i, status, b)
				}
			}
			if !equalInts(got, tc.faults) {
				t.Errorf("faulted requests %v, want %v", got, tc.faults)
			}
			if s.Requests() != int64(tc.n) {
				t.Errorf("Requests() = %d, want %d", s.Requests(), tc.n)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSetOptionsRestartsSequence(t *testing.T) {
	t.Parallel()
	s, ts := newTestServer(t, Options{ErrorRate: 0.5})
	first, _, _ := call(t, ts, http.MethodPost, "/v1/chat/completions", chatBody, nil)
	second, _, _ := call(t, ts, http.MethodPost, "/v1/chat/completions", chatBody, nil)
	if first != 200 || second != 500 {
		t.Fatalf("statuses %d %d, want 200 500", first, second)
	}
	s.SetOptions(Options{ErrorRate: 0.5, Status: 429})
	if got := s.Options(); got.Status != 429 || got.ErrorRate != 0.5 {
		t.Fatalf("Options() = %+v", got)
	}
	first, _, _ = call(t, ts, http.MethodPost, "/v1/chat/completions", chatBody, nil)
	second, _, _ = call(t, ts, http.MethodPost, "/v1/chat/completions", chatBody, nil)
	if first != 200 || second != 429 {
		t.Fatalf("after SetOptions statuses %d %d, want 200 429", first, second)
	}
}

func TestHangReturnsWhenClientGoes(t *testing.T) {
	t.Parallel()
	s, ts := newTestServer(t, Options{Hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(chatBody))
	start := time.Now()
	resp, err := ts.Client().Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a hanging request got a response: %d", resp.StatusCode)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the client deadline", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("returned after %v, before the deadline", d)
	}
	// The handler returned: the server can be closed without waiting, and
	// a fault-free option set answers again.
	s.SetOptions(Options{})
	if status, _, _ := call(t, ts, http.MethodPost, "/v1/chat/completions", chatBody, nil); status != 200 {
		t.Errorf("after hang: status %d", status)
	}
}

func TestCloseReleasesHang(t *testing.T) {
	t.Parallel()
	s, ts := newTestServer(t, Options{Hang: true})
	done := make(chan error, 1)
	go func() {
		resp, err := ts.Client().Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	testwait.For(t, 10*time.Second, "the request reaches the hang", func() bool { return s.Requests() > 0 })
	s.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("a released hang got a response; want an aborted connection")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the hanging request")
	}
}

func TestCutAfter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		path    string
		body    string
		hdr     map[string]string
		content func(sseEvent) bool
		final   func(sseEvent) bool
	}{
		{
			name:    "chat",
			path:    "/v1/chat/completions",
			body:    chatStream,
			content: func(e sseEvent) bool { return strings.Contains(e.data, `"delta":{"content"`) },
			final:   func(e sseEvent) bool { return e.data == "[DONE]" || strings.Contains(e.data, `"finish_reason":"`) },
		},
		{
			name:    "responses",
			path:    "/v1/responses",
			body:    respStream,
			content: func(e sseEvent) bool { return e.name == "response.output_text.delta" },
			final:   func(e sseEvent) bool { return e.name == "response.completed" || e.name == "response.output_text.done" },
		},
		{
			name:    "messages",
			path:    "/v1/messages",
			body:    msgStream,
			hdr:     anthropicHdr,
			content: func(e sseEvent) bool { return e.name == "content_block_delta" },
			final:   func(e sseEvent) bool { return e.name == "message_stop" || e.name == "message_delta" },
		},
	}
	for _, tc := range cases {
		for _, cut := range []int{1, 3, 8, 20} {
			t.Run(fmt.Sprintf("%s/cut%d", tc.name, cut), func(t *testing.T) {
				_, ts := newTestServer(t, Options{CutAfter: cut, Chunks: 8})
				evs, err := postStream(t, ts, tc.path, tc.body, tc.hdr)
				if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("stream error %v, want an unexpected EOF", err)
				}
				n := 0
				for _, e := range evs {
					if tc.content(e) {
						n++
					}
					if tc.final(e) {
						t.Errorf("closing event after a cut: %+v", e)
					}
				}
				if want := min(cut, 8); n != want {
					t.Errorf("%d content chunks, want %d", n, want)
				}
			})
		}
	}
}

func TestTiming(t *testing.T) {
	t.Parallel()
	const d = 60 * time.Millisecond
	_, ts := newTestServer(t, Options{Latency: d, FirstChunk: d, ChunkGap: d / 4, Chunks: 4})
	start := time.Now()
	resp := do(t, context.Background(), ts, http.MethodPost, "/v1/chat/completions", chatStream, nil)
	headers := time.Since(start)
	evs, err := readSSE(t, resp.Body)
	resp.Body.Close()
	total := time.Since(start)
	if err != nil || len(evs) == 0 {
		t.Fatalf("stream: %v (%d events)", err, len(evs))
	}
	if headers < d {
		t.Errorf("headers after %v, want at least Latency %v", headers, d)
	}
	if want := 2*d + 3*d/4; total < want {
		t.Errorf("stream took %v, want at least %v", total, want)
	}
}

func TestLatencyCancelled(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{Latency: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(chatBody))
	if resp, err := ts.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("got a response during an hour of latency")
	}
}

func TestConcurrentSetOptions(t *testing.T) {
	t.Parallel()
	s, ts := newTestServer(t, Options{})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				resp, err := ts.Client().Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatStream))
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	for i := 0; i < 50; i++ {
		s.SetOptions(Options{Chunks: 1 + i%5, ErrorRate: float64(i%3) / 4})
	}
	wg.Wait()
	if s.Requests() != 160 {
		t.Errorf("Requests() = %d, want 160", s.Requests())
	}
}

// TestSeededErrorRate: with a seed, faults are independent draws at the
// rate: over 10,000 draws the share is within 4 standard deviations of the
// rate, runs of consecutive faults occur (the even sequence never has two
// in a row at 0.5), the same seed replays the same sequence and another
// seed gives another.
func TestSeededErrorRate(t *testing.T) {
	t.Parallel()
	const n = 10000
	draws := func(rate float64, seed uint64) []bool {
		c := newConfig(Options{ErrorRate: rate, Seed: seed})
		out := make([]bool, n)
		for i := range out {
			out[i] = c.fault()
		}
		return out
	}
	for _, rate := range []float64{0.1, 0.5, 0.9} {
		for _, seed := range []uint64{1, 7, 1 << 40} {
			got := draws(rate, seed)
			faults, run, longest := 0, 0, 0
			for _, f := range got {
				if f {
					faults++
					run++
					longest = max(longest, run)
				} else {
					run = 0
				}
			}
			sd := math.Sqrt(n * rate * (1 - rate))
			if d := math.Abs(float64(faults) - n*rate); d > 4*sd {
				t.Errorf("rate %v seed %d: %d faults in %d, %.1f sd from %v", rate, seed, faults, n, d/sd, n*rate)
			}
			if rate == 0.5 && longest < 5 {
				t.Errorf("seed %d: longest run of faults %d; independent draws at 0.5 give runs of ~13 in 10,000", seed, longest)
			}
		}
	}
	a, b, other := draws(0.5, 7), draws(0.5, 7), draws(0.5, 8)
	same := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 7 replayed differently at draw %d", i)
		}
		if a[i] == other[i] {
			same++
		}
	}
	if same > n*6/10 {
		t.Errorf("seeds 7 and 8 agree on %d of %d draws: not independent", same, n)
	}
}

// TestSeededErrorRateOverHTTP: -seed reaches the server's answers, and
// SetOptions restarts the sequence.
func TestSeededErrorRateOverHTTP(t *testing.T) {
	t.Parallel()
	s, ts := newTestServer(t, Options{ErrorRate: 0.5, Seed: 7})
	seq := func() []int {
		var st []int
		for i := 0; i < 40; i++ {
			status, _, _ := call(t, ts, http.MethodPost, "/v1/chat/completions", chatBody, nil)
			st = append(st, status)
		}
		return st
	}
	first := seq()
	faults := 0
	for _, st := range first {
		if st == 500 {
			faults++
		} else if st != 200 {
			t.Fatalf("status %d", st)
		}
	}
	if faults == 0 || faults == 40 {
		t.Fatalf("%d of 40 faulted at 0.5", faults)
	}
	s.SetOptions(Options{ErrorRate: 0.5, Seed: 7})
	if again := seq(); !equalInts(again, first) {
		t.Fatalf("same seed, another sequence:\n%v\n%v", first, again)
	}
}
