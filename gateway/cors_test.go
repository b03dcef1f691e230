package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/gateway/config"
)

// preflight sends a browser's CORS preflight for method and headers.
func preflight(t *testing.T, e *env, path, origin, method, headers string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodOptions, e.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", method)
	if headers != "" {
		req.Header.Set("Access-Control-Request-Headers", headers)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// TestCORSPreflight: /v1/* answers a browser's preflight without a key, for
// any origin by default, allowing the headers the page asks for and no
// credentials; the answer that follows carries the CORS headers, errors
// included.
func TestCORSPreflight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "standard")
	for _, path := range []string{"/v1/chat/completions", "/v1/messages", "/v1/models"} {
		st, h := preflight(t, e, path, "https://app.example", "POST", "authorization,content-type,x-api-key,anthropic-version,x-stainless-os")
		if st != http.StatusNoContent {
			t.Fatalf("%s preflight: %d", path, st)
		}
		if h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Access-Control-Allow-Methods") != "POST" ||
			!strings.Contains(h.Get("Access-Control-Allow-Headers"), "x-api-key") || h.Get("Access-Control-Max-Age") != "600" {
			t.Fatalf("%s preflight headers: %v", path, h)
		}
		if h.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("credentials allowed: %v", h)
		}
	}
	st, h, body := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hi"), "Origin", "https://app.example")
	if st != 200 || h.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(h.Get("Access-Control-Expose-Headers"), "X-Request-Id") ||
		!strings.Contains(h.Get("Access-Control-Expose-Headers"), "Retry-After-Ms") {
		t.Fatalf("answer %d %v: %s", st, h, body)
	}
	st, h, _ = e.do("GET", "/v1/models", "", nil, "Origin", "https://app.example")
	if st != 401 || h.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("a 401 a page cannot read: %d %v", st, h)
	}
	// Outside /v1/ nothing changes: the admin API answers no preflight.
	if st, h := preflight(t, e, "/admin/keys", "https://app.example", "GET", "authorization"); h.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("admin preflight %d: %v", st, h)
	}
}

// TestCORSConfigured: only the configured origins get CORS headers, and
// cors.disable turns it all off.
func TestCORSConfigured(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *config.Config) {
		c.CORS = config.CORSConfig{Origins: []string{"https://app.example", "https://*.tools.example"}}
	})
	for origin, allowed := range map[string]bool{
		"https://app.example": true, "https://a.tools.example": true, "https://evil.example": false,
	} {
		_, h := preflight(t, e, "/v1/responses", origin, "POST", "authorization")
		if got := h.Get("Access-Control-Allow-Origin"); (got == origin) != allowed || (!allowed && got != "") {
			t.Errorf("%s: Access-Control-Allow-Origin %q", origin, got)
		}
	}
	off := newEnv(t, func(c *config.Config) { c.CORS.Disable = true })
	st, h := preflight(t, off, "/v1/chat/completions", "https://app.example", "POST", "authorization")
	if h.Get("Access-Control-Allow-Origin") != "" || st == http.StatusNoContent {
		t.Fatalf("disabled CORS answered the preflight: %d %v", st, h)
	}
}
