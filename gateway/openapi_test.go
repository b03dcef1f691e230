package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/openapi"
	"github.com/modelrelay/modelrelay/internal/testwait"
	"github.com/modelrelay/modelrelay/pricing"
)

// The conformance tests send real requests through a gateway and validate
// each request and each response against the served OpenAPI 3.1 document
// with kin-openapi (openapi3filter, JSON Schema 2020-12 for 3.1 documents).
// The document's own validity against the official OpenAPI 3.1 schema is
// tested in package openapi.

var registerDecoders sync.Once

// conformance is a loaded document and its router.
type conformance struct {
	doc    *openapi3.T
	router routers.Router
}

func loadConformance(t testing.TB) *conformance {
	t.Helper()
	registerDecoders.Do(func() {
		// Bodies that are not JSON are validated as strings.
		openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
		openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
		openapi3filter.RegisterBodyDecoder("video/mp4", openapi3filter.FileBodyDecoder)
		openapi3filter.RegisterBodyDecoder("image/png", openapi3filter.FileBodyDecoder)
	})
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.Document())
	if err != nil {
		t.Fatalf("kin-openapi cannot load the document: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("kin-openapi reads the document as OpenAPI %s", doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("kin-openapi rejects the document: %v", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &conformance{doc: doc, router: router}
}

// authenticate checks the credential a security scheme names is present in
// the shape the document describes.
func authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	r := in.RequestValidationInput.Request
	switch s := in.SecurityScheme; {
	case s.Type == "http" && s.Scheme == "bearer":
		if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || v == "" {
			return errors.New("no bearer token")
		}
	case s.Type == "apiKey" && s.In == "header":
		if r.Header.Get(s.Name) == "" {
			return fmt.Errorf("no %s header", s.Name)
		}
	default:
		return fmt.Errorf("unexpected security scheme %s", in.SecuritySchemeName)
	}
	return nil
}

// exchange is one request to send and what the document must say about it.
type exchange struct {
	name        string
	method      string
	path        string
	header      map[string]string
	body        []byte
	wantStatus  int
	wantInvalid bool // the document must reject the request too
}

// run sends x to the gateway and validates request and response.
func (c *conformance) run(t *testing.T, e *env, x exchange) (http.Header, []byte) {
	t.Helper()
	newReq := func(base string) *http.Request {
		var rd io.Reader
		if x.body != nil {
			rd = bytes.NewReader(x.body)
		}
		req, err := http.NewRequest(x.method, base+x.path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if x.body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range x.header {
			req.Header.Set(k, v)
		}
		return req
	}
	resp, err := http.DefaultClient.Do(newReq(e.url))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	if resp.StatusCode != x.wantStatus {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, x.wantStatus, body)
	}

	req := newReq("http://relay.test")
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s is not in the document: %v", x.method, x.path, err)
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: authenticate, MultiError: true},
	}
	err = openapi3filter.ValidateRequest(context.Background(), in)
	switch {
	case x.wantInvalid && err == nil:
		t.Errorf("the gateway answered %d but the document accepts the request", resp.StatusCode)
	case !x.wantInvalid && err != nil:
		t.Errorf("the document rejects a request the gateway accepts as valid: %v", err)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("the response does not conform to the document: %v\n%s", err, truncate(body, 600))
	}
	return resp.Header, body
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return append(b[:n:n], "…"...)
	}
	return b
}

// errorSchema validates a body against components.schemas.Error.
func (c *conformance) errorSchema(t *testing.T, body []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("error body is not JSON: %s", body)
	}
	if err := c.doc.Components.Schemas["Error"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		t.Fatalf("error body does not match the Error schema: %v\n%s", err, body)
	}
}

func TestOpenAPIConformance(t *testing.T) {
	t.Parallel()
	c := loadConformance(t)
	e := newEnv(t, func(cfg *config.Config) { cfg.Limits.PricingRate = config.RateConfig{Rate: 0.01, Burst: 2} })
	e.account("acme", "50")
	e.account("broke", "0")
	key := e.key("acme", "standard")
	brokeKey := e.key("broke", "standard")
	bearer := map[string]string{"Authorization": "Bearer " + key}
	withBearer := func(kv ...string) map[string]string {
		h := map[string]string{"Authorization": "Bearer " + key}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	chat := chatBody("modela-sonnet-5-5", "Say hello", `"max_tokens":32`)
	msgs := `{"model":"modela-sonnet-5-5","max_tokens":64,"messages":[{"role":"user","content":"Say hello"}]}`

	tests := []exchange{
		{name: "chat", method: "POST", path: "/v1/chat/completions", header: bearer, body: []byte(chat), wantStatus: 200},
		{name: "chat stream", method: "POST", path: "/v1/chat/completions", header: bearer,
			body: []byte(chatBody("modelf-flash", "Stream please", `"stream":true`)), wantStatus: 200},
		{name: "chat with extra fields", method: "POST", path: "/v1/chat/completions", header: bearer,
			body: []byte(chatBody("modelc-4.7", "hi", `"seed":7`, `"logit_bias":{"50256":-100}`, `"temperature":0.2`)), wantStatus: 200},
		{name: "responses", method: "POST", path: "/v1/responses", header: bearer,
			body: []byte(`{"model":"modelb-6-astra","input":"Write one line","max_output_tokens":50}`), wantStatus: 200},
		{name: "responses stream", method: "POST", path: "/v1/responses", header: bearer,
			body: []byte(`{"model":"modelc-4.7","input":[{"role":"user","content":"hi"}],"stream":true}`), wantStatus: 200},
		{name: "messages with bearer", method: "POST", path: "/v1/messages", header: withBearer("vendorx-version", "2023-06-01"),
			body: []byte(msgs), wantStatus: 200},
		{name: "messages with x-api-key", method: "POST", path: "/v1/messages",
			header: map[string]string{"x-api-key": key, "vendorx-version": "2023-06-01"}, body: []byte(msgs), wantStatus: 200},
		{name: "messages stream", method: "POST", path: "/v1/messages", header: withBearer("vendorx-version", "2023-06-01"),
			body: []byte(`{"model":"modela-fable-5-1","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`), wantStatus: 200},
		{name: "messages with a system turn, ?beta=true", method: "POST", path: "/v1/messages?beta=true",
			header: map[string]string{"x-api-key": key, "vendorx-version": "2023-06-01", "anthropic-beta": "context-management-2025-06-27"},
			body: []byte(`{"model":"modela-opus-5-5","max_tokens":64,"messages":[{"role":"user","content":"hi"},{"role":"system","content":"be brief"}],` +
				`"context_management":{"edits":[]},"output_config":{"effort":"low"},"tools":[{"name":"t","input_schema":{"type":"object"},"defer_loading":true}]}`), wantStatus: 200},
		{name: "count_tokens with x-api-key, ?beta=true", method: "POST", path: "/v1/messages/count_tokens?beta=true",
			header: map[string]string{"x-api-key": key, "vendorx-version": "2023-06-01", "anthropic-beta": "token-counting-2024-11-01"},
			body:   []byte(`{"model":"modela-sonnet-5-5","messages":[{"role":"user","content":"Say hello"}]}`), wantStatus: 200},
		{name: "count_tokens with bearer, no credit", method: "POST", path: "/v1/messages/count_tokens",
			header: map[string]string{"Authorization": "Bearer " + brokeKey, "vendorx-version": "2023-06-01"},
			body:   []byte(`{"model":"modela-fable-5-1","system":"s","messages":[{"role":"user","content":"x"}]}`), wantStatus: 200},
		{name: "responses compact", method: "POST", path: "/v1/responses/compact", header: bearer,
			body: []byte(`{"model":"modelb-6-astra","instructions":"be brief","input":[{"role":"user","content":"a long talk"},{"type":"function_call_output","call_id":"c","output":"x"}]}`), wantStatus: 200},
		{name: "responses with a compaction trigger", method: "POST", path: "/v1/responses", header: bearer,
			body: []byte(`{"model":"modelb-6.1-sol","store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"k","input":[{"role":"user","content":"hi"},{"type":"compaction_trigger"}]}`), wantStatus: 200},
		{name: "models", method: "GET", path: "/v1/models", header: bearer, wantStatus: 200},
		{name: "models, Anthropic shape", method: "GET", path: "/v1/models", header: withBearer("anthropic-version", "2023-06-01"), wantStatus: 200},
		{name: "models, Anthropic shape, a page", method: "GET", path: "/v1/models?limit=2&after_id=modelf-flash", header: withBearer("anthropic-version", "2023-06-01"), wantStatus: 200},
		{name: "400 models limit", method: "GET", path: "/v1/models?limit=0", header: withBearer("anthropic-version", "2023-06-01"), wantStatus: 400, wantInvalid: true},
		{name: "426 responses WebSocket", method: "GET", path: "/v1/responses", header: map[string]string{"Upgrade": "websocket", "Connection": "Upgrade"}, wantStatus: 426},
		{name: "405 responses GET", method: "GET", path: "/v1/responses", wantStatus: 405},
		{name: "price table", method: "GET", path: "/api/pricing", wantStatus: 200},
		{name: "price table again", method: "GET", path: "/api/pricing", wantStatus: 200},
		{name: "openapi document", method: "GET", path: "/openapi.json", wantStatus: 200},
		{name: "price page", method: "GET", path: "/pricing", wantStatus: 200},

		{name: "400 no messages", method: "POST", path: "/v1/chat/completions", header: bearer,
			body: []byte(`{"model":"modela-sonnet-5-5"}`), wantStatus: 400, wantInvalid: true},
		{name: "400 unknown role", method: "POST", path: "/v1/chat/completions", header: bearer,
			body: []byte(`{"model":"modela-sonnet-5-5","messages":[{"role":"robot","content":"x"}]}`), wantStatus: 400, wantInvalid: true},
		{name: "400 max_tokens 0", method: "POST", path: "/v1/chat/completions", header: bearer,
			body: []byte(chatBody("modela-sonnet-5-5", "x", `"max_tokens":0`)), wantStatus: 400, wantInvalid: true},
		{name: "400 body not an object", method: "POST", path: "/v1/chat/completions", header: bearer,
			body: []byte(`[1,2]`), wantStatus: 400, wantInvalid: true},
		{name: "400 responses without input", method: "POST", path: "/v1/responses", header: bearer,
			body: []byte(`{"model":"modelb-6-astra"}`), wantStatus: 400, wantInvalid: true},
		{name: "400 messages without max_tokens", method: "POST", path: "/v1/messages", header: withBearer("vendorx-version", "2023-06-01"),
			body: []byte(`{"model":"modela-sonnet-5-5","messages":[{"role":"user","content":"x"}]}`), wantStatus: 400, wantInvalid: true},
		{name: "400 messages without vendorx-version", method: "POST", path: "/v1/messages", header: bearer,
			body: []byte(msgs), wantStatus: 400, wantInvalid: true},
		{name: "400 count_tokens without vendorx-version", method: "POST", path: "/v1/messages/count_tokens", header: bearer,
			body: []byte(`{"model":"modela-sonnet-5-5","messages":[{"role":"user","content":"x"}]}`), wantStatus: 400, wantInvalid: true},
		{name: "400 compact with an object input", method: "POST", path: "/v1/responses/compact", header: bearer,
			body: []byte(`{"model":"modelb-6-astra","input":{"role":"user"}}`), wantStatus: 400, wantInvalid: true},
		{name: "401 count_tokens without a key", method: "POST", path: "/v1/messages/count_tokens",
			header: map[string]string{"anthropic-version": "2023-06-01"},
			body:   []byte(`{"model":"modela-sonnet-5-5","messages":[{"role":"user","content":"x"}]}`), wantStatus: 401, wantInvalid: true},
		{name: "403 compact with a messages model", method: "POST", path: "/v1/responses/compact", header: bearer,
			body: []byte(`{"model":"modela-opus-5-5","input":"x"}`), wantStatus: 403},
		{name: "401 no key", method: "POST", path: "/v1/chat/completions", body: []byte(chat), wantStatus: 401, wantInvalid: true},
		{name: "401 unknown key", method: "POST", path: "/v1/chat/completions",
			header: map[string]string{"Authorization": "Bearer sk-unknown-key-0000000000000000"}, body: []byte(chat), wantStatus: 401},
		{name: "401 x-api-key on chat", method: "POST", path: "/v1/chat/completions",
			header: map[string]string{"x-api-key": key}, body: []byte(chat), wantStatus: 401, wantInvalid: true},
		{name: "401 models without key", method: "GET", path: "/v1/models", wantStatus: 401, wantInvalid: true},
		{name: "402 empty balance", method: "POST", path: "/v1/chat/completions",
			header: map[string]string{"Authorization": "Bearer " + brokeKey}, body: []byte(chat), wantStatus: 402},
		{name: "403 model not sold", method: "POST", path: "/v1/chat/completions", header: bearer,
			body: []byte(chatBody("no-such-model", "x")), wantStatus: 403},
		{name: "403 model not served by responses", method: "POST", path: "/v1/responses", header: bearer,
			body: []byte(`{"model":"modela-opus-5-5","input":"x"}`), wantStatus: 403},
		{name: "403 typed-question model on chat", method: "POST", path: "/v1/chat/completions", header: bearer,
			body: []byte(chatBody("sysmodel-latest", "x")), wantStatus: 403},
		{name: "429 price table", method: "GET", path: "/api/pricing", wantStatus: 429}, // burst 2: the third call
	}

	for _, x := range tests {
		t.Run(x.name, func(t *testing.T) {
			hdr, body := c.run(t, e, x)
			if x.wantStatus >= 400 {
				msg, _, _ := errBody(t, body)
				if rid := hdr.Get("X-Request-Id"); rid == "" || !strings.HasSuffix(msg, rid) {
					t.Errorf("the message %q does not end with the request id %q", msg, rid)
				}
			}
			if x.wantStatus == 429 && (hdr.Get("Retry-After") == "" || hdr.Get("Retry-After-Ms") == "" || hdr.Get("X-Should-Retry") != "true") {
				t.Errorf("429 without its retry hints: %v", hdr)
			}
			if (x.wantStatus == 402 || x.wantStatus == 403 || x.wantStatus == 426) && hdr.Get("X-Should-Retry") != "false" {
				t.Errorf("%d without x-should-retry: false", x.wantStatus)
			}
		})
	}

	t.Run("404 not relayed", func(t *testing.T) {
		for _, p := range []string{"/v1/embeddings", "/v1/files", "/v1/audio/speech", "/v1/batches", "/v1/nothing"} {
			status, hdr, body := e.do("POST", p, key, "{}")
			if status != http.StatusNotFound {
				t.Fatalf("POST %s = %d: %s", p, status, body)
			}
			if _, _, err := c.router.FindRoute(httpRequest(t, "POST", p)); err == nil {
				t.Errorf("%s is in the document but not relayed", p)
			}
			c.errorSchema(t, body)
			if hdr.Get("X-Request-Id") == "" {
				t.Errorf("POST %s: no X-Request-Id", p)
			}
		}
	})
}

// TestOpenAPIDocumentMatchesRoutes: every documented operation is routed,
// and every relayed endpoint (with its aliases) is documented.
func TestOpenAPIDocumentMatchesRoutes(t *testing.T) {
	t.Parallel()
	c := loadConformance(t)
	e := newEnv(t)
	n := 0
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			concrete := strings.ReplaceAll(path, "{request_id}", "vid_123")
			if h, _, _ := e.gw.router.Lookup(method, concrete); h == nil {
				t.Errorf("%s %s is documented but not routed", method, path)
			}
			n++
		}
	}
	if n < 14 {
		t.Errorf("only %d documented operations", n)
	}
	for _, ep := range endpoints {
		for _, p := range append([]string{ep.path}, ep.aliases...) {
			if _, _, err := c.router.FindRoute(httpRequest(t, "POST", p)); err != nil {
				t.Errorf("the relayed endpoint POST %s (%s) is not documented: %v", p, ep.name, err)
			}
		}
	}
}

// TestOpenAPIConformanceModelNotFound: a model sold here that the provider
// does not know returns the provider's 404 in the documented shape.
func TestOpenAPIConformanceModelNotFound(t *testing.T) {
	t.Parallel()
	c := loadConformance(t)
	dir := copyPluginDir(t)
	dropInPlugin(t, dir, "unknown", `{"models": [{"id": "modelz-unknown-upstream", "endpoints": ["chat_completions"], "auto_route": "standard",
	  "routes": {"standard": {"unit": "per_million_tokens", "input": "1", "output": "2"}}}]}`)
	e := newEnv(t, func(cfg *config.Config) { cfg.Plugins.Dir = dir })
	e.account("acme", "5")
	key := e.key("acme", "standard")
	_, body := c.run(t, e, exchange{method: "POST", path: "/v1/chat/completions",
		header: map[string]string{"Authorization": "Bearer " + key},
		body:   []byte(chatBody("modelz-unknown-upstream", "hi")), wantStatus: 404})
	if _, _, code := errBody(t, body); code != "model_not_found" {
		t.Errorf("code = %v, want model_not_found", code)
	}
	if a := e.balance("acme"); a.Balance != 5*pricing.NanoPerUSD {
		t.Errorf("a failed call was charged: balance %s", a.Balance)
	}
}

// The gateway's own overload refusal (503 overloaded, Retry-After) is in
// the document.
func TestOpenAPIConformanceOverloaded(t *testing.T) {
	t.Parallel()
	c := loadConformance(t)
	e := newEnv(t, func(cfg *config.Config) { cfg.Limits.OverloadDelay = time.Hour })
	e.account("acme", "5")
	key := e.key("acme", "standard")
	e.gw.shed.next.Store(math.MaxInt64) // no window ends: the share set here stays
	e.gw.shed.p.Store(shedScale)        // every call refused
	h, body := c.run(t, e, exchange{method: "POST", path: "/v1/chat/completions",
		header: map[string]string{"Authorization": "Bearer " + key},
		body:   []byte(chatBody("modelf-flash", "hi")), wantStatus: 503})
	if _, _, code := errBody(t, body); code != "overloaded" || h.Get("Retry-After") != "1" || h.Get("Retry-After-Ms") != "1000" || h.Get("X-Should-Retry") != "true" {
		t.Errorf("code %v, Retry-After %q, retry-after-ms %q, x-should-retry %q", code, h.Get("Retry-After"), h.Get("Retry-After-Ms"), h.Get("X-Should-Retry"))
	}
}

func httpRequest(t *testing.T, method, path string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, "http://relay.test"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestOpenAPIConformanceMediaEndpoints covers the image, video and
// typed-question endpoints.
func TestOpenAPIConformanceMediaEndpoints(t *testing.T) {
	t.Parallel()
	c := loadConformance(t)
	e := newEnv(t)
	e.account("acme", "50")
	key := e.key("acme", "standard")
	bearer := map[string]string{"Authorization": "Bearer " + key}
	for _, x := range []exchange{
		{name: "image generation", method: "POST", path: "/v1/images/generations", header: bearer,
			body: []byte(`{"model":"modelb-image-2.5-flare","prompt":"a red kite","size":"1024x1024","n":2}`), wantStatus: 200},
		{name: "image n 129", method: "POST", path: "/v1/images/generations", header: bearer,
			body: []byte(`{"model":"modelb-image-2.5-flare","prompt":"a red kite","n":129}`), wantStatus: 400, wantInvalid: true},
		{name: "typed question", method: "POST", path: "/v1/systemone", header: bearer,
			body: []byte(`{"model":"sysmodel-latest","state":"The user asked twice for a refund.","questions":{"refund":{"type":"noul"}}}`), wantStatus: 200},
		{name: "typed question alias", method: "POST", path: "/v1/system_one", header: bearer,
			body: []byte(`{"model":"sysmodel-1.13.0","state":"x","questions":{"mood":{"type":"choice","options":["calm","angry"]}}}`), wantStatus: 200},
		{name: "typed question without questions", method: "POST", path: "/v1/systemone", header: bearer,
			body: []byte(`{"model":"sysmodel-latest","state":"x","questions":{}}`), wantStatus: 400, wantInvalid: true},
		{name: "video duration 16", method: "POST", path: "/v1/videos/generations", header: bearer,
			body: []byte(`{"model":"modelc-imagine-video-1.5","prompt":"waves","duration":16}`), wantStatus: 400, wantInvalid: true},
		{name: "video unknown job", method: "GET", path: "/v1/videos/vid_does_not_exist", header: bearer, wantStatus: 404},
	} {
		t.Run(x.name, func(t *testing.T) { c.run(t, e, x) })
	}

	t.Run("video job", func(t *testing.T) {
		_, body := c.run(t, e, exchange{method: "POST", path: "/v1/videos/generations", header: bearer,
			body: []byte(`{"model":"modelc-imagine-video-1.5","prompt":"waves","duration":2,"resolution":"720p"}`), wantStatus: 200})
		var job struct {
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal(body, &job); err != nil || job.RequestID == "" {
			t.Fatalf("no request_id: %s", body)
		}
		var st struct {
			Status string `json:"status"`
		}
		if !testwait.Holds(10*time.Second, func() bool {
			_, body := c.run(t, e, exchange{method: "GET", path: "/v1/videos/" + job.RequestID, header: bearer, wantStatus: 200})
			_ = json.Unmarshal(body, &st)
			return st.Status == "done"
		}) {
			t.Fatalf("the job is still %q", st.Status)
		}
		c.run(t, e, exchange{method: "GET", path: "/v1/videos/" + job.RequestID + "/content", header: bearer, wantStatus: 200})
	})

	t.Run("image edit", func(t *testing.T) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("model", "modelb-image-2.5-sunburst")
		_ = mw.WriteField("prompt", "make it blue")
		_ = mw.WriteField("n", "1")
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="image"; filename="in.png"`)
		h.Set("Content-Type", "image/png")
		part, _ := mw.CreatePart(h)
		_, _ = part.Write([]byte("\x89PNG\r\n\x1a\nnot really a picture"))
		_ = mw.Close()
		c.run(t, e, exchange{method: "POST", path: "/v1/images/edits", body: buf.Bytes(), wantStatus: 200,
			header: map[string]string{"Authorization": "Bearer " + key, "Content-Type": mw.FormDataContentType()}})
	})
}

// TestOpenAPIConformanceHolder covers the key holder's reads: each answer
// conforms to the document, and carries no field the document does not
// describe.
func TestOpenAPIConformanceHolder(t *testing.T) {
	t.Parallel()
	c := loadConformance(t)
	e := newEnv(t)
	e.account("acme", "50")
	key := e.key("acme", "standard")
	bearer := map[string]string{"Authorization": "Bearer " + key}
	h, _ := c.run(t, e, exchange{method: "POST", path: "/v1/chat/completions", header: bearer,
		body: []byte(chatBody("modelf-flash", "hi")), wantStatus: 200})
	rid := h.Get("X-Request-Id")
	usage := "/v1/dashboard/billing/usage?start_date=" + time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly) +
		"&end_date=" + time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	for _, x := range []struct {
		exchange
		schema string // the 200 answer's schema, whose properties bound its fields
	}{
		{exchange{name: "key", method: "GET", path: "/v1/key", header: bearer, wantStatus: 200}, "KeyInfo"},
		{exchange{name: "generation", method: "GET", path: "/v1/generations/" + rid, header: bearer, wantStatus: 200}, "Generation"},
		{exchange{name: "subscription", method: "GET", path: "/v1/dashboard/billing/subscription", header: bearer, wantStatus: 200}, "BillingSubscription"},
		{exchange{name: "usage", method: "GET", path: usage, header: bearer, wantStatus: 200}, "BillingUsage"},
		{exchange: exchange{name: "404 generation", method: "GET", path: "/v1/generations/req_0000", header: bearer, wantStatus: 404}},
		{exchange: exchange{name: "401 key without a key", method: "GET", path: "/v1/key", wantStatus: 401, wantInvalid: true}},
		{exchange: exchange{name: "400 usage without dates", method: "GET", path: "/v1/dashboard/billing/usage", header: bearer, wantStatus: 400, wantInvalid: true}},
		{exchange: exchange{name: "400 usage, a date not YYYY-MM-DD", method: "GET", path: "/v1/dashboard/billing/usage?start_date=2026-9-1&end_date=2026-10-01",
			header: bearer, wantStatus: 400, wantInvalid: true}},
		{exchange: exchange{name: "400 usage, February 30", method: "GET", path: "/v1/dashboard/billing/usage?start_date=2026-02-01&end_date=2026-02-30",
			header: bearer, wantStatus: 400}},
		{exchange: exchange{name: "400 usage over 100 days", method: "GET", path: "/v1/dashboard/billing/usage?start_date=2026-01-01&end_date=2026-06-01",
			header: bearer, wantStatus: 400}},
	} {
		t.Run(x.name, func(t *testing.T) {
			_, body := c.run(t, e, x.exchange)
			if x.schema != "" {
				c.onlyDocumented(t, x.schema, body)
			}
		})
	}
}

// onlyDocumented fails t if an object of body has a field its schema's
// properties do not name (the document does not forbid extra fields, so
// that clients accept later additions; the gateway must not send
// undocumented ones).
func (c *conformance) onlyDocumented(t *testing.T, schema string, body []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, s *openapi3.Schema, v any)
	walk = func(path string, s *openapi3.Schema, v any) {
		obj, ok := v.(map[string]any)
		if !ok || len(s.Properties) == 0 {
			return
		}
		for k, x := range obj {
			p, ok := s.Properties[k]
			if !ok {
				t.Errorf("%s.%s is not in the document", path, k)
				continue
			}
			walk(path+"."+k, p.Value, x)
		}
	}
	walk(schema, c.doc.Components.Schemas[schema].Value, v)
}

// TestOpenAPICostHeaderDocumented: the 200 answer of every charged
// endpoint documents x-relay-cost-usd; the uncharged ones do not.
func TestOpenAPICostHeaderDocumented(t *testing.T) {
	t.Parallel()
	c := loadConformance(t)
	for _, ep := range endpoints {
		for _, p := range append([]string{ep.path}, ep.aliases...) {
			item := c.doc.Paths.Find(p)
			if item == nil || item.Post == nil {
				t.Fatalf("POST %s is not documented", p)
			}
			ok := item.Post.Responses.Status(200)
			if ok == nil || ok.Value == nil {
				t.Fatalf("POST %s has no 200", p)
			}
			_, has := ok.Value.Headers[costHeader]
			if has == ep.uncharged {
				t.Errorf("POST %s: x-relay-cost-usd documented %v, charged %v", p, has, !ep.uncharged)
			}
		}
	}
}
