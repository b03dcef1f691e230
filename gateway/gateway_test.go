package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/internal/testwait"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	good := e.key("acme", "auto")
	revoked := e.key("acme", "auto")
	if st, _, body := e.do("POST", "/admin/keys/revoke", testAdminToken, map[string]string{"key": revoked}); st != 200 {
		t.Fatalf("revoke: %d %s", st, body)
	}
	body := chatBody("modelf-flash", "hello")
	cases := []struct {
		name   string
		path   string
		header []string
		want   int
		msg    string
	}{
		{"no key", "/v1/chat/completions", nil, 401, "missing API key"},
		{"bearer valid", "/v1/chat/completions", []string{"Authorization", "Bearer " + good}, 200, ""},
		{"bearer lower-case scheme", "/v1/chat/completions", []string{"Authorization", "bearer " + good}, 200, ""},
		{"bearer unknown sk key", "/v1/chat/completions", []string{"Authorization", "Bearer sk-unknownunknownunknownunknown"}, 401, "invalid API key"},
		{"bearer not an sk key", "/v1/chat/completions", []string{"Authorization", "Bearer " + testAdminToken}, 401, "invalid API key"},
		{"basic auth", "/v1/chat/completions", []string{"Authorization", "Basic Zm9vOmJhcg=="}, 401, "Bearer"},
		{"revoked key", "/v1/chat/completions", []string{"Authorization", "Bearer " + revoked}, 401, "revoked"},
		{"x-api-key on chat", "/v1/chat/completions", []string{"X-Api-Key", good}, 401, "x-api-key is accepted on /v1/messages only"},
		{"x-api-key on models", "/v1/models", []string{"X-Api-Key", good}, 401, "/v1/messages only"},
		{"admin API with sk key", "/admin/keys", []string{"Authorization", "Bearer " + good}, 401, "API keys cannot use the admin API"},
		{"admin API with wrong token", "/admin/keys", []string{"Authorization", "Bearer wrong-token-wrong-token"}, 401, "invalid admin token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method, b := "POST", any(body)
			if !strings.HasPrefix(tc.path, "/v1/chat") {
				method, b = "GET", nil
			}
			st, h, data := e.do(method, tc.path, "", b, tc.header...)
			if st != tc.want {
				t.Fatalf("status %d, want %d: %s", st, tc.want, data)
			}
			if tc.want != 200 {
				msg, typ, _ := errBody(t, data)
				if !strings.Contains(msg, tc.msg) {
					t.Errorf("message %q does not say %q", msg, tc.msg)
				}
				if typ != "authentication_error" {
					t.Errorf("type %q", typ)
				}
				if rid := h.Get("X-Request-Id"); rid == "" || !strings.HasSuffix(msg, rid) {
					t.Errorf("message %q does not end with the request id %q", msg, rid)
				}
			}
		})
	}
}

func TestRoutesAndModelLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	auto := e.key("acme", "auto")
	economy := e.key("acme", "economy")
	standard := e.key("acme", "standard")
	limited := e.key("acme", "auto", "modelf-flash")
	cases := []struct {
		name  string
		key   string
		model string
		want  int
		msg   string
	}{
		{"auto calls a standard-only model", auto, "modela-opus-5-5", 200, ""},
		{"auto calls an economy model", auto, "modelf-flash", 200, ""},
		{"economy calls an economy model", economy, "modele-k3", 200, ""},
		{"economy calls a standard-only model", economy, "modela-opus-5-5", 403, `not on this key's route "economy"`},
		{"standard calls a standard model", standard, "modela-sonnet-5-5", 200, ""},
		{"unknown model", auto, "gpt-4o", 403, "is not sold here"},
		{"excluded model", limited, "modelf-flash", 403, "excluded by this key's model limits"},
		{"limited key, other model", limited, "modelf-v4-pro", 200, ""},
		{"image model on chat", auto, "modelb-image-2.5-flare", 403, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, _, data := e.do("POST", "/v1/chat/completions", tc.key, chatBody(tc.model, "hi"))
			if st != tc.want {
				t.Fatalf("status %d, want %d: %s", st, tc.want, data)
			}
			if tc.want == 403 {
				msg, typ, _ := errBody(t, data)
				if !strings.Contains(msg, tc.msg) {
					t.Errorf("message %q does not say %q", msg, tc.msg)
				}
				if typ != "permission_error" {
					t.Errorf("type %q", typ)
				}
			}
		})
	}

	list := func(key string) map[string]bool {
		st, _, data := e.do("GET", "/v1/models", key, nil)
		if st != 200 {
			t.Fatalf("models: %d %s", st, data)
		}
		var l struct {
			Object string `json:"object"`
			Data   []struct {
				ID      string `json:"id"`
				Object  string `json:"object"`
				OwnedBy string `json:"owned_by"`
			} `json:"data"`
		}
		if err := json.Unmarshal(data, &l); err != nil || l.Object != "list" {
			t.Fatalf("models body: %s", data)
		}
		out := map[string]bool{}
		for _, m := range l.Data {
			if m.Object != "model" || m.OwnedBy == "" {
				t.Errorf("item %+v", m)
			}
			out[m.ID] = true
		}
		return out
	}
	all, eco, lim := list(auto), list(economy), list(limited)
	if !all["modela-opus-5-5"] || !all["modelf-flash"] {
		t.Errorf("auto list misses models: %v", all)
	}
	if eco["modela-opus-5-5"] || !eco["modelf-flash"] {
		t.Errorf("economy list not filtered by route: %v", eco)
	}
	if lim["modelf-flash"] || len(lim) != len(all)-1 {
		t.Errorf("limited list not filtered by exclusion: %v", lim)
	}
}

func TestErrorBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "auto")
	cases := []struct {
		name  string
		body  string
		field string
	}{
		{"malformed JSON", `{"model":`, "not valid JSON"},
		{"not an object", `[1,2]`, "JSON object"},
		{"empty body", ``, "empty"},
		{"missing model", `{"messages":[{"role":"user","content":"x"}]}`, "model is required"},
		{"model wrong type", `{"model":5,"messages":[{"role":"user","content":"x"}]}`, "model"},
		{"missing messages", `{"model":"modelf-flash"}`, "messages is required"},
		{"empty messages", `{"model":"modelf-flash","messages":[]}`, "messages must contain"},
		{"bad role", `{"model":"modelf-flash","messages":[{"role":"robot","content":"x"}]}`, "messages[0].role"},
		{"missing content", `{"model":"modelf-flash","messages":[{"role":"user"}]}`, "messages[0].content"},
		{"max_tokens wrong type", `{"model":"modelf-flash","messages":[{"role":"user","content":"x"}],"max_tokens":"ten"}`, "max_tokens"},
		{"max_tokens zero", `{"model":"modelf-flash","messages":[{"role":"user","content":"x"}],"max_tokens":0}`, "max_tokens"},
		{"stream wrong type", `{"model":"modelf-flash","messages":[{"role":"user","content":"x"}],"stream":"yes"}`, "stream"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, h, data := e.do("POST", "/v1/chat/completions", key, tc.body)
			if st != 400 {
				t.Fatalf("status %d: %s", st, data)
			}
			msg, typ, _ := errBody(t, data)
			if !strings.Contains(msg, tc.field) {
				t.Errorf("message %q does not name %q", msg, tc.field)
			}
			if typ != "invalid_request_error" {
				t.Errorf("type %q", typ)
			}
			rid := h.Get("X-Request-Id")
			if !strings.HasPrefix(rid, "req_") || !strings.HasSuffix(msg, rid) || !strings.Contains(msg, "help@relay.test") {
				t.Errorf("message %q must quote the support address and end with request id %q", msg, rid)
			}
		})
	}
	if b := e.balance("acme"); b.Balance.String() != "5" || b.Held != 0 {
		t.Errorf("bad requests touched the ledger: %+v", b)
	}
}

func TestNotRelayedPaths(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "1")
	key := e.key("acme", "auto")
	for _, p := range []struct{ method, path string }{
		{"POST", "/v1/embeddings"}, {"POST", "/v1/batches"}, {"GET", "/v1/files"}, {"POST", "/v1/files"},
		{"POST", "/v1/fine_tuning/jobs"}, {"POST", "/v1/assistants"}, {"POST", "/v1/threads/runs"},
		{"POST", "/v1/vector_stores"}, {"GET", "/v1/realtime"}, {"POST", "/v1/audio/speech"},
		{"POST", "/v1/audio/transcriptions"}, {"GET", "/v2/whatever"}, {"GET", "/"},
	} {
		t.Run(p.method+" "+p.path, func(t *testing.T) {
			st, _, data := e.do(p.method, p.path, key, nil)
			if st != 404 {
				t.Fatalf("status %d: %s", st, data)
			}
			msg, typ, _ := errBody(t, data)
			if typ != "not_found_error" || !strings.Contains(msg, "request id req_") {
				t.Errorf("error %q %q", typ, msg)
			}
		})
	}
	st, h, data := e.do("GET", "/v1/chat/completions", key, nil)
	if st != http.StatusMethodNotAllowed {
		t.Fatalf("wrong method: %d %s", st, data)
	}
	if msg, _, _ := errBody(t, data); !strings.Contains(msg, "POST") || h.Get("Allow") == "" {
		t.Errorf("405 should name the allowed method: %q", msg)
	}
}

// TestAccessLogLine: every relayed call leaves one access-log line with its
// request id, status, model, route, line, charge and its durations in whole
// microseconds (integers: slog formats floats through encoding/json).
func TestAccessLogLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "10")
	key := e.key("acme", "economy")
	st, hdr, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "log me"))
	if st != 200 {
		t.Fatalf("status %d: %s", st, data)
	}
	rid := hdr.Get("X-Request-Id")
	// The line is written after the settle, which follows the answer: wait
	// for it.
	var line map[string]any
	testwait.Holds(5*time.Second, func() bool {
		for _, l := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(l, `"msg":"request"`) && strings.Contains(l, rid) {
				dec := json.NewDecoder(strings.NewReader(l))
				dec.UseNumber()
				if err := dec.Decode(&line); err != nil {
					t.Fatalf("access log line %q: %v", l, err)
				}
			}
		}
		return line != nil
	})
	if line == nil {
		t.Fatalf("no access log line for %s in:\n%s", rid, e.logs.String())
	}
	for field, want := range map[string]any{"endpoint": "chat_completions", "status": json.Number("200"), "model": "modelf-flash", "route": "economy"} {
		if line[field] != want {
			t.Errorf("%s = %v, want %v", field, line[field], want)
		}
	}
	if line["line"] == nil || line["charge_usd"] == nil || line["key_id"] == nil {
		t.Errorf("line, charge_usd or key_id missing: %v", line)
	}
	for _, field := range []string{"latency_us", "upstream_us"} {
		n, ok := line[field].(json.Number)
		if !ok {
			t.Fatalf("%s = %v, want a number", field, line[field])
		}
		if v, err := n.Int64(); err != nil || v < 0 {
			t.Errorf("%s = %s, want whole microseconds", field, n)
		}
	}
	if lat, _ := line["latency_us"].(json.Number).Int64(); lat == 0 {
		t.Errorf("latency_us is 0: a relayed call takes longer than a microsecond")
	}
}
