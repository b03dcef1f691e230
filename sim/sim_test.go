package sim

import (
	"encoding/json"
	"flag"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestModelsList(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	status, _, b := call(t, ts, http.MethodGet, "/v1/models", "", nil)
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	l := decode[struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}](t, b)
	ids := Models()
	if l.Object != "list" || len(l.Data) != len(ids) || len(ids) != 16 {
		t.Fatalf("list %s, want %d models", b, len(ids))
	}
	for i, m := range l.Data {
		if m.ID != ids[i] || m.Object != "model" || m.OwnedBy == "" {
			t.Errorf("item %d %+v, want id %s", i, m, ids[i])
		}
	}
	ids[0] = "changed"
	if Models()[0] == "changed" {
		t.Errorf("Models shares its slice")
	}
}

func TestRouting(t *testing.T) {
	t.Parallel()
	s, ts := newTestServer(t, Options{})
	cases := []struct {
		name         string
		method, path string
		hdr          map[string]string
		status       int
		anthropic    bool
	}{
		{"unknown path", http.MethodGet, "/v1/embeddings", nil, 404, false},
		{"root", http.MethodGet, "/", nil, 404, false},
		{"wrong method", http.MethodGet, "/v1/chat/completions", nil, 405, false},
		{"wrong method on messages", http.MethodGet, "/v1/messages", nil, 405, true},
		{"post models", http.MethodPost, "/v1/models", nil, 405, false},
		{"image file needs .png", http.MethodGet, imageFilePrefix + "x.jpg", nil, 404, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, b := call(t, ts, tc.method, tc.path, "", tc.hdr)
			if status != tc.status {
				t.Fatalf("status %d, want %d", status, tc.status)
			}
			if status == 405 && hdr.Get("Allow") == "" {
				t.Errorf("405 without Allow")
			}
			if tc.anthropic {
				if e := decode[anthErrBody](t, b); e.Type != "error" || e.Error.Message == "" {
					t.Errorf("body %s", b)
				}
			} else if e := decode[errBody](t, b); e.Error.Message == "" {
				t.Errorf("body %s", b)
			}
		})
	}
	if s.Requests() != int64(len(cases)) {
		t.Errorf("Requests() = %d, want %d", s.Requests(), len(cases))
	}
}

func TestAPIKey(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{APIKey: "sk-sim-123"})
	cases := []struct {
		name   string
		path   string
		body   string
		hdr    map[string]string
		status int
	}{
		{"no key", "/v1/chat/completions", chatBody, nil, 401},
		{"wrong bearer", "/v1/chat/completions", chatBody, map[string]string{"Authorization": "Bearer sk-other"}, 401},
		{"bearer", "/v1/chat/completions", chatBody, map[string]string{"Authorization": "Bearer sk-sim-123"}, 200},
		{"lowercase bearer scheme", "/v1/chat/completions", chatBody, map[string]string{"Authorization": "bearer sk-sim-123"}, 200},
		{"x-api-key", "/v1/chat/completions", chatBody, map[string]string{"x-api-key": "sk-sim-123"}, 200},
		{"messages without key", "/v1/messages", msgBody, anthropicHdr, 401},
		{"messages x-api-key", "/v1/messages", msgBody, map[string]string{"x-api-key": "sk-sim-123", "anthropic-version": "2023-06-01"}, 200},
		{"models without key", "/v1/models", "", nil, 401},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPost
			if tc.body == "" {
				method = http.MethodGet
			}
			status, _, b := call(t, ts, method, tc.path, tc.body, tc.hdr)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			if status != 401 {
				return
			}
			if tc.path == "/v1/messages" {
				if e := decode[anthErrBody](t, b); e.Error.Type != "authentication_error" {
					t.Errorf("body %s", b)
				}
			} else if e := decode[errBody](t, b); e.Error.Code == nil || *e.Error.Code != "invalid_api_key" {
				t.Errorf("body %s", b)
			}
		})
	}
}

func TestRegisterFlags(t *testing.T) {
	t.Parallel()
	o := Options{Chunks: 3}
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	o.RegisterFlags(fs)
	err := fs.Parse([]string{"-latency=5ms", "-first-chunk=6ms", "-chunk-gap=7ms", "-fault-status=503",
		"-error-rate=0.25", "-seed=7", "-hang", "-cut-after=2", "-retry-after=9", "-api-key=k", "-video-steps=2s"})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Latency: 5 * time.Millisecond, FirstChunk: 6 * time.Millisecond, ChunkGap: 7 * time.Millisecond,
		Chunks: 3, Status: 503, ErrorRate: 0.25, Seed: 7, Hang: true, CutAfter: 2, RetryAfter: 9, APIKey: "k", VideoSteps: 2 * time.Second}
	if o != want {
		t.Errorf("parsed %+v\nwant   %+v", o, want)
	}
	for _, name := range []string{"latency", "first-chunk", "chunk-gap", "chunks", "fault-status", "error-rate",
		"seed", "hang", "cut-after", "retry-after", "api-key", "video-steps"} {
		if fs.Lookup(name) == nil {
			t.Errorf("flag -%s not registered", name)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		o    Options
		flag string
	}{
		{"zero", Options{}, ""},
		{"full", Options{Status: 429, ErrorRate: 1, Chunks: 3, CutAfter: 2}, ""},
		{"negative latency", Options{Latency: -1}, "-latency"},
		{"status 200", Options{Status: 200}, "-fault-status"},
		{"rate above 1", Options{ErrorRate: 1.5}, "-error-rate"},
		{"negative chunks", Options{Chunks: -1}, "-chunks"},
		{"negative cut", Options{CutAfter: -1}, "-cut-after"},
		{"negative video step", Options{VideoSteps: -time.Second}, "-video-steps"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if (err == nil) != (tc.flag == "") || (err != nil && !strings.Contains(err.Error(), tc.flag)) {
				t.Errorf("Validate() = %v, want an error naming %q", err, tc.flag)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	cases := []struct {
		s    string
		want int64
	}{
		{"", 0}, {"a", 1}, {"abcd", 1}, {"abcde", 2}, {"é", 1}, {strings.Repeat("x", 4096), 1024}, {strings.Repeat("x", 4097), 1025},
	}
	for _, tc := range cases {
		if got := Tokens(tc.s); got != tc.want {
			t.Errorf("Tokens(%d bytes) = %d, want %d", len(tc.s), got, tc.want)
		}
	}
}

func TestReplyChunks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		echo  string
		limit int64
		words int64
	}{
		{"default length", "hello", 0, ReplyWords},
		{"long echo capped at EchoWords", strings.Repeat("w ", 200), 0, 4 + EchoWords},
		{"limit 1", "hello", 1, 1},
		{"unicode whitespace", "a\u00a0b\tc\n d", 0, ReplyWords},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := buildReply("modelf-flash", tc.echo, tc.limit)
			if r.words() != tc.words || int64(len(strings.Fields(r.text))) != tc.words {
				t.Fatalf("%d words (%q), want %d", r.words(), r.text, tc.words)
			}
			if !strings.HasPrefix(r.text, "Simulated reply from modelf-flash:"[:min(len(r.text), 34)]) {
				t.Errorf("text %q", r.text)
			}
			for _, n := range []int{1, 2, 3, 7, 8, 24, 100} {
				var b strings.Builder
				empty := 0
				for i := 0; i < n; i++ {
					c := r.chunk(i, n)
					if c == "" {
						empty++
					}
					b.WriteString(c)
				}
				if b.String() != r.text {
					t.Errorf("%d chunks join to %q, want %q", n, b.String(), r.text)
				}
				if wantEmpty := max(0, n-int(r.words())); empty != wantEmpty {
					t.Errorf("%d chunks: %d empty, want %d", n, empty, wantEmpty)
				}
			}
		})
	}
}

func TestAppendString(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", `q"b\s`, "\n\r\t\x00\x1f", "é ü 日本", "\u2028\u2029", "bad\xffutf8", "<&>"} {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", s, b, err)
		}
		want, _ := json.Marshal(s)
		var w string
		_ = json.Unmarshal(want, &w)
		if got != w {
			t.Errorf("%q round-trips to %q, encoding/json gives %q", s, got, w)
		}
	}
}
