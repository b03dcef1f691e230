package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/sim"
)

// TestHeaderFilter: what reaches the client of a provider's headers, by
// default and as configured.
func TestHeaderFilter(t *testing.T) {
	t.Parallel()
	src := http.Header{
		"Content-Type":                    {"application/json"},
		"Openai-Organization":             {"org-operator"},
		"Openai-Project":                  {"proj_operator"},
		"Anthropic-Organization-Id":       {"0b1c-operator"},
		"X-Ratelimit-Remaining-Requests":  {"4999"},
		"X-Ratelimit-Limit-Tokens":        {"800000"},
		"Anthropic-Ratelimit-Tokens-Left": {"12"},
		"Set-Cookie":                      {"__cf_bm=abc; path=/"},
		"Alt-Svc":                         {`h3=":443"`},
		"X-Request-Id":                    {"req_upstream_1"},
		"Request-Id":                      {"req_011CUpstream"},
		"Connection":                      {"keep-alive, X-Hop"},
		"X-Hop":                           {"1"},
		"Transfer-Encoding":               {"chunked"},
		"Access-Control-Allow-Origin":     {"https://provider.example"},
		"Vary":                            {"Accept-Encoding"},
		"Openai-Processing-Ms":            {"312"},
		"Cf-Ray":                          {"8f00-LHR"},
	}
	cases := []struct {
		name string
		cfg  config.HeadersConfig
		want map[string]string // "" = absent
	}{
		{"defaults", config.HeadersConfig{}, map[string]string{
			"Content-Type": "application/json", "Openai-Processing-Ms": "312", "Cf-Ray": "8f00-LHR",
			"Upstream-X-Request-Id": "req_upstream_1", "Upstream-Request-Id": "req_011CUpstream",
			"X-Request-Id": "req_ours", "Vary": "Origin, Accept-Encoding",
			"Openai-Organization": "", "Openai-Project": "", "Anthropic-Organization-Id": "",
			"X-Ratelimit-Remaining-Requests": "", "X-Ratelimit-Limit-Tokens": "", "Anthropic-Ratelimit-Tokens-Left": "",
			"Set-Cookie": "", "Alt-Svc": "", "Request-Id": "", "Connection": "", "X-Hop": "", "Transfer-Encoding": "",
			"Access-Control-Allow-Origin": "",
		}},
		{"configured", config.HeadersConfig{Drop: []string{"cf-ray", "OPENAI-*"}, RequestIDs: []string{"request-id"}, UpstreamPrefix: "provider-"}, map[string]string{
			"Cf-Ray": "", "Openai-Organization": "", "Openai-Processing-Ms": "",
			"X-Ratelimit-Limit-Tokens": "800000", "Set-Cookie": "__cf_bm=abc; path=/",
			"Provider-Request-Id": "req_011CUpstream", "Request-Id": "", "Upstream-Request-Id": "",
			"X-Request-Id": "req_ours", // the gateway's, whatever the list says
			"Connection":   "", "X-Hop": "", "Access-Control-Allow-Origin": "",
		}},
		{"nothing configurable dropped", config.HeadersConfig{Drop: []string{}, RequestIDs: []string{}}, map[string]string{
			"Openai-Organization": "org-operator", "X-Ratelimit-Limit-Tokens": "800000",
			"X-Request-Id": "req_ours", "Upstream-X-Request-Id": "", "Transfer-Encoding": "",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Resolve(); err != nil {
				t.Fatal(err)
			}
			dst := http.Header{"X-Request-Id": {"req_ours"}, "Vary": {"Origin"}}
			newHeaderFilter(tc.cfg).copy(dst, src)
			for k, want := range tc.want {
				if got := strings.Join(dst.Values(k), ", "); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

// TestUpstreamHeadersCleaned: through the gateway, JSON and streamed
// answers keep their bodies but lose the operator's account headers; the
// provider's request id is kept under upstream-x-request-id.
func TestUpstreamHeadersCleaned(t *testing.T) {
	t.Parallel()
	s := sim.New(sim.Options{})
	t.Cleanup(s.Close)
	leaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Openai-Organization", "org-operator")
		h.Set("Openai-Project", "proj_operator")
		h.Set("X-Ratelimit-Remaining-Tokens", "799000")
		h.Set("Set-Cookie", "__cf_bm=abc; path=/")
		h.Set("X-Request-Id", "req_upstream_7")
		h.Set("Openai-Processing-Ms", "12")
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(leaky.Close)
	e := newEnv(t, func(c *config.Config) { c.Lines[0].BaseURL = leaky.URL })
	e.account("acme", "5")
	key := e.key("acme", "standard")
	for _, body := range []string{chatBody("modelf-flash", "hi"), chatBody("modelf-flash", "hi", `"stream":true`)} {
		st, h, data := e.do("POST", "/v1/chat/completions", key, body)
		if st != 200 || len(data) == 0 {
			t.Fatalf("%d: %s", st, data)
		}
		for _, k := range []string{"Openai-Organization", "Openai-Project", "X-Ratelimit-Remaining-Tokens", "Set-Cookie"} {
			if v := h.Get(k); v != "" {
				t.Errorf("%s reached the client: %q", k, v)
			}
		}
		if h.Get("Upstream-X-Request-Id") != "req_upstream_7" || !strings.HasPrefix(h.Get("X-Request-Id"), "req_") || h.Get("X-Request-Id") == "req_upstream_7" {
			t.Errorf("request ids: ours %q, upstream %q", h.Get("X-Request-Id"), h.Get("Upstream-X-Request-Id"))
		}
		if h.Get("Openai-Processing-Ms") != "12" {
			t.Errorf("a harmless header was dropped: %q", h.Get("Openai-Processing-Ms"))
		}
	}
}

// FuzzHeaderFilter: any upstream header set is copied without a panic, and
// nothing dropped by default or hop-by-hop comes through.
func FuzzHeaderFilter(f *testing.F) {
	f.Add("Connection", "keep-alive, X-Foo", "X-Foo", "1")
	f.Add("x-ratelimit-limit", "5", "Openai-Organization", "org")
	f.Add("Connection", ",,, ,", "Vary", "*")
	f.Add("request-id", "r", "Set-Cookie", "a=b")
	var cfg config.HeadersConfig
	if err := cfg.Resolve(); err != nil {
		f.Fatal(err)
	}
	hf := newHeaderFilter(cfg)
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		src := http.Header{}
		src[k1] = []string{v1}
		src[k2] = append(src[k2], v2)
		dst := http.Header{}
		hf.copy(dst, src)
		for _, k := range []string{"Openai-Organization", "Set-Cookie", "Connection", "Transfer-Encoding", "Request-Id", "X-Request-Id"} {
			if _, ok := dst[k]; ok {
				t.Fatalf("%s came through from %v", k, src)
			}
		}
		for k := range dst {
			if strings.HasPrefix(k, "X-Ratelimit-") {
				t.Fatalf("%s came through", k)
			}
		}
	})
}
