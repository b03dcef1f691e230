package gateway

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/apierr"
)

// TestModelListShapes: GET /v1/models answers in the OpenAI shape, and in
// the Anthropic shape when anthropic-version (or vendorx-version) is sent;
// both list only the models the key's route serves, and the key stays a
// Bearer token.
func TestModelListShapes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "economy", "modelf-flash")
	var want []string
	for _, m := range e.host.Catalog().Models() {
		if _, ok := m.Routes["economy"]; ok && m.ID != "modelf-flash" {
			want = append(want, m.ID)
		}
	}
	if len(want) == 0 {
		t.Fatal("no model on route economy")
	}

	checkOpenAIModelList(t, e, key, want)
	for _, hdr := range []string{"anthropic-version", "vendorx-version"} {
		checkAnthropicModelList(t, e, key, hdr, want)
	}
	// x-api-key is for the messages endpoints only, whatever the shape.
	if st, _, body := e.do("GET", "/v1/models", "", nil, "x-api-key", key, "anthropic-version", "2023-06-01"); st != 401 {
		t.Fatalf("x-api-key on /v1/models: %d %s", st, body)
	}
	// Paging as the Anthropic SDKs do: limit, after_id, before_id.
	st, _, body := e.do("GET", "/v1/models?limit=1&after_id="+url.QueryEscape(want[0]), key, nil, "anthropic-version", "2023-06-01")
	if st != 200 || !strings.Contains(string(body), `"first_id":"`+want[1]+`"`) {
		t.Fatalf("after_id page: %d %s", st, body)
	}
	st, _, body = e.do("GET", "/v1/models?limit=0", key, nil, "anthropic-version", "2023-06-01")
	if _, _, code := errBody(t, body); st != 400 || code != "invalid_limit" {
		t.Fatalf("limit=0: %d %s", st, body)
	}
}

// checkOpenAIModelList wants /v1/models in the OpenAI shape, listing
// exactly the models want, with no Anthropic field.
func checkOpenAIModelList(t *testing.T, e *env, key string, want []string) {
	t.Helper()
	st, _, body := e.do("GET", "/v1/models", key, nil)
	var oa struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			OwnedBy string `json:"owned_by"`
			Created int64  `json:"created"`
		} `json:"data"`
	}
	if st != 200 || json.Unmarshal(body, &oa) != nil || oa.Object != "list" {
		t.Fatalf("OpenAI shape: %d %s", st, body)
	}
	var got []string
	for _, m := range oa.Data {
		got = append(got, m.ID)
		if m.Object != "model" || m.Created == 0 || m.OwnedBy == "" {
			t.Errorf("item %+v", m)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("OpenAI list %v, want %v", got, want)
	}
	if strings.Contains(string(body), `"type"`) {
		t.Errorf("OpenAI shape carries Anthropic fields: %s", body)
	}
}

// checkAnthropicModelList wants /v1/models asked with the version header
// hdr in the Anthropic shape: exactly the models want, on one page.
func checkAnthropicModelList(t *testing.T, e *env, key, hdr string, want []string) {
	t.Helper()
	st, _, body := e.do("GET", "/v1/models", key, nil, hdr, "2023-06-01")
	var an struct {
		Data []struct {
			Type        string `json:"type"`
			ID          string `json:"id"`
			DisplayName string `json:"display_name"`
			CreatedAt   string `json:"created_at"`
		} `json:"data"`
		HasMore *bool   `json:"has_more"`
		FirstID *string `json:"first_id"`
		LastID  *string `json:"last_id"`
	}
	if st != 200 || json.Unmarshal(body, &an) != nil || an.HasMore == nil || *an.HasMore {
		t.Fatalf("%s: Anthropic shape: %d %s", hdr, st, body)
	}
	var got []string
	for _, m := range an.Data {
		got = append(got, m.ID)
		if _, err := time.Parse(time.RFC3339, m.CreatedAt); m.Type != "model" || m.DisplayName == "" || err != nil {
			t.Errorf("item %+v", m)
		}
	}
	if !slices.Equal(got, want) || an.FirstID == nil || *an.FirstID != want[0] || an.LastID == nil || *an.LastID != want[len(want)-1] {
		t.Fatalf("%s: Anthropic list %v (first %v, last %v), want %v", hdr, got, an.FirstID, an.LastID, want)
	}
	if strings.Contains(string(body), `"object"`) || !strings.Contains(string(body), `"display_name"`) {
		t.Errorf("not the Anthropic shape: %s", body)
	}
}

func TestModelPage(t *testing.T) {
	t.Parallel()
	ids := []string{"a", "b", "c", "d", "e"}
	for _, tc := range []struct {
		query    string
		from, to int
		more     bool
		errField string
	}{
		{"", 0, 5, false, ""},
		{"limit=2", 0, 2, true, ""},
		{"limit=2&after_id=b", 2, 4, true, ""},
		{"limit=2&after_id=d", 4, 5, false, ""},
		{"after_id=e", 5, 5, false, ""},
		{"limit=2&before_id=e", 2, 4, true, ""},
		{"limit=2&before_id=b", 0, 1, false, ""},
		{"limit=1000", 0, 5, false, ""},
		{"limit=1001", 0, 0, false, "limit"},
		{"limit=x", 0, 0, false, "limit"},
		{"after_id=zz", 0, 0, false, "after_id"},
		{"before_id=zz", 0, 0, false, "before_id"},
		{"after_id=a&before_id=c", 0, 0, false, "before_id"},
	} {
		q, _ := url.ParseQuery(tc.query)
		from, to, more, err := modelPage(q, ids)
		if tc.errField != "" {
			if e, ok := err.(*apierr.Error); !ok || e.Status != http.StatusBadRequest || e.Code != "invalid_"+tc.errField {
				t.Errorf("%q: %v, want a 400 naming %s", tc.query, err, tc.errField)
			}
			continue
		}
		if err != nil || from != tc.from || to != tc.to || more != tc.more {
			t.Errorf("%q: [%d:%d] more %v (%v), want [%d:%d] more %v", tc.query, from, to, more, err, tc.from, tc.to, tc.more)
		}
	}
}

// FuzzModelPage: any query gives a page inside the list or a 400.
func FuzzModelPage(f *testing.F) {
	for _, s := range []string{"", "limit=3", "after_id=b&limit=1", "before_id=a", "limit=-1", "after_id=%ff", "limit=99999999999999999999"} {
		f.Add(s)
	}
	ids := []string{"a", "b", "c"}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		from, to, _, err := modelPage(q, ids)
		if err != nil {
			if e, ok := err.(*apierr.Error); !ok || e.Status != http.StatusBadRequest {
				t.Fatalf("%q: %v", raw, err)
			}
			return
		}
		if from < 0 || to < from || to > len(ids) {
			t.Fatalf("%q: [%d:%d]", raw, from, to)
		}
	})
}

// TestResponsesWebSocket426: a WebSocket upgrade on /v1/responses is
// answered 426 at once, in the error shape, before any key check, so that
// Codex falls back to HTTP; a plain GET stays 405.
func TestResponsesWebSocket426(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, hdr := range [][]string{
		{"Upgrade", "websocket", "Connection", "Upgrade", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
		{"Upgrade", "WebSocket", "Authorization", "Bearer sk-not-a-key"},
	} {
		start := time.Now()
		st, h, body := e.do("GET", "/v1/responses", "", nil, hdr...)
		if st != http.StatusUpgradeRequired {
			t.Fatalf("%v: %d %s", hdr, st, body)
		}
		msg, typ, code := errBody(t, body)
		if code != "websocket_not_supported" || typ != "invalid_request_error" || !strings.Contains(msg, "HTTP POST") || !strings.HasSuffix(msg, h.Get("X-Request-Id")) {
			t.Fatalf("%v: %s", hdr, body)
		}
		if h.Get("X-Should-Retry") != "false" || h.Get("Retry-After") != "" {
			t.Errorf("hints: %v", h)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the 426 took %v", d)
		}
	}
	st, h, body := e.do("GET", "/v1/responses", "", nil)
	if _, _, code := errBody(t, body); st != 405 || code != "method_not_allowed" || h.Get("Allow") != "POST" {
		t.Fatalf("plain GET: %d %v %s", st, h, body)
	}
}
