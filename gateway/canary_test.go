package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/sim"
)

// probe is one request of the canary test: every part a caller controls.
type probe struct {
	name   string
	method string
	path   string // with the query string
	hdr    []string
	body   []byte
	want   int
}

// sendProbe sends p with the canary in a custom header, the User-Agent,
// anthropic-version and OpenAI-Organization (unless p sets them) and in the
// query string, and returns the status, the request id and the body.
func sendProbe(t *testing.T, base, tok string, p probe) (int, string, []byte) {
	t.Helper()
	path := p.path
	if strings.Contains(path, "?") {
		path += "&c=" + tok
	} else {
		path += "?c=" + tok
	}
	req, err := http.NewRequest(p.method, base+path, bytes.NewReader(p.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Canary", tok)
	req.Header.Set("User-Agent", "agent/"+tok)
	req.Header.Set("Anthropic-Version", tok)
	req.Header.Set("OpenAI-Organization", tok)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(p.hdr); i += 2 {
		req.Header.Set(p.hdr[i], p.hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Request-Id"), data
}

// canaryForms are the ways a canary may be written: as it is, JSON-escaped
// (with and without HTML escaping) and Go-quoted, without their quotes.
func canaryForms(s string) []string {
	inner := func(q string) string { return q[1 : len(q)-1] }
	j, _ := json.Marshal(s)
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return []string{s, inner(string(j)), inner(strings.TrimSpace(plain.String())), inner(strconv.Quote(s)), inner(strconv.QuoteToASCII(s))}
}

// scanForCanary fails the test when a form of a canary is in a file under
// dir or in text (named what).
func scanForCanary(t *testing.T, e *env, texts map[string]string, canaries ...string) {
	t.Helper()
	var forms []string
	for _, c := range canaries {
		forms = append(forms, canaryForms(c)...)
	}
	rest := e.atRest(t)
	for where, b := range rest {
		for _, f := range forms {
			if bytes.Contains(b, []byte(f)) {
				t.Errorf("the canary (%.30q) is at rest in %s", f, where)
			}
		}
	}
	if len(rest) == 0 {
		t.Fatalf("nothing at rest under %s: the scan proves nothing", e.dataDir)
	}
	for what, text := range texts {
		for _, f := range forms {
			if i := strings.Index(text, f); i >= 0 {
				t.Errorf("the canary (%.30q) is in the %s: …%s…", f, what, text[max(0, i-200):min(len(text), i+100)])
			}
		}
	}
}

// multipartForm builds an image-edit form: text fields, then an image file.
func multipartForm(fields [][2]string, file []byte) (string, []byte) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, f := range fields {
		_ = mw.WriteField(f[0], f[1])
	}
	if file != nil {
		fw, _ := mw.CreateFormFile("image", "a.png")
		_, _ = fw.Write(file)
	}
	_ = mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// A canary sent in every part of a request a caller controls — the model
// (short and long), prompt and other body fields, form fields, the path, the
// query string, custom headers, User-Agent, anthropic-version, the key — in
// requests that fail at each stage of a call and in calls that succeed, is
// never written to the data directory, the logs or /metrics.
func TestCallerTextNeverAtRestOrLogged(t *testing.T) {
	t.Parallel()
	tight := func(c *config.Config) {
		c.Routes = append(c.Routes, config.RouteConfig{Name: "tight", Rate: &config.RateConfig{Rate: 0.001, Burst: 1}})
	}
	e := newEnv(t, tight)
	needModels(t, e, "modelb-6-astra", "modela-opus-5-5", "modelb-image-2.5-flare", "modelb-image-2.5-sunburst", "modelc-imagine-video-1.5", "sysmodel-latest")
	e.account("acme", "50")
	e.account("poor", "0")
	keys := canaryKeys{key: e.key("acme", "auto"), poorKey: e.key("poor", "auto"), tightKey: e.key("acme", "tight")}
	c := newCanary()
	ck := &canaryCheck{t: t, url: e.url, tok: c.tok}

	probes := canaryFailureProbes(c, keys)
	for _, p := range probes {
		ck.check(p)
	}
	// The error bodies echo the canary, bounded: the requests carried it
	// to where they failed.
	if ck.echoed < 10 {
		t.Errorf("only %d error bodies quote the canary: the probes do not reach their stages", ck.echoed)
	}
	checkCanarySuccesses(ck, c, keys.key)
	provokeProviderFailures(ck, e, c, keys.key)
	dead, deadKey := probeDeadLine(t, c)

	_, _, metricsText := e.do("GET", "/metrics", "", nil)
	if !strings.Contains(string(metricsText), `model="modelb-6-astra"`) {
		t.Fatalf("/metrics has no model label: the scan proves nothing")
	}
	for _, x := range []*env{e, dead} {
		x.srv.Close()
		if err := x.store.Close(); err != nil {
			t.Fatal(err)
		}
	}
	logs := e.logs.String()
	if n := strings.Count(logs, `"msg":"request"`); n < len(probes)-10 {
		t.Fatalf("only %d access-log lines: the scan proves nothing", n)
	}
	if !strings.Contains(dead.logs.String(), "request failed") {
		t.Fatalf("the dead line's failure was not logged: the scan proves nothing")
	}
	texts := map[string]string{"logs": logs, "dead line's logs": dead.logs.String(), "metrics": string(metricsText)}
	scanForCanary(t, e, texts, c.tok, c.rich)
	scanForCanary(t, dead, nil, c.tok, c.rich)
	for _, secret := range []string{keys.key, keys.poorKey, keys.tightKey, deadKey} {
		if strings.Contains(logs, secret) || strings.Contains(dead.logs.String(), secret) {
			t.Errorf("a key (%s…) is in the logs", secret[:8])
		}
	}
	// The scan can find things: a model id is at rest.
	found := false
	for _, b := range e.atRest(t) {
		found = found || bytes.Contains(b, []byte("modelb-6-astra"))
	}
	if !found {
		t.Fatal("the journal's model id was not found at rest: the scan proves nothing")
	}
}

// canary is what the canary test sends in every part of a request.
type canary struct {
	tok  string // fits a header, a path, a method
	rich string // escapes differently in JSON and Go
}

func newCanary() canary {
	tok := fmt.Sprintf("CANARY%dzebra", time.Now().UnixNano())
	return canary{tok: tok, rich: tok + "\"<é\u2028>\\\n"}
}

// chat is a chat body of model and content, with the canary in its user
// and metadata fields, and extra fields ("name":value) after them.
func (c canary) chat(model, content string, extra ...string) []byte {
	q := quoteJSON
	s := `{"model":` + q(model) + `,"messages":[{"role":"user","content":` + q(content) + `}],"user":` + q(c.rich) + `,"metadata":{"note":` + q(c.rich) + `}`
	for _, x := range extra {
		s += "," + x
	}
	return []byte(s + "}")
}

// quoteJSON is s as a JSON string.
func quoteJSON(s string) string { b, _ := json.Marshal(s); return string(b) }

// bearer is the header (name, value) that sends key k.
func bearer(k string) []string { return []string{"Authorization", "Bearer " + k} }

// headers joins (name, value) pairs into one list.
func headers(kv ...[]string) []string {
	var out []string
	for _, x := range kv {
		out = append(out, x...)
	}
	return out
}

// canaryKeys are the canary test's keys: one with credit, one on an
// account without, and one whose rate bucket holds a single call.
type canaryKeys struct{ key, poorKey, tightKey string }

// canaryFailureProbes are requests carrying the canary that fail at each
// stage of a call, and the public and ops endpoints.
func canaryFailureProbes(c canary, k canaryKeys) []probe {
	tok, rich, q, chat, hdr := c.tok, c.rich, quoteJSON, c.chat, headers
	key, poorKey, tightKey := k.key, k.poorKey, k.tightKey
	longModel := strings.Repeat(tok, (1<<20)/len(tok)) // 1 MiB
	badForm, badFormBody := multipartForm([][2]string{{"model", "modelb-image-2.5-sunburst"}, {"prompt", rich}, {"size", rich}}, []byte("png "+tok))
	utf8Form, utf8FormBody := multipartForm([][2]string{{"model", "modelb-image-2.5-sunburst"}, {"prompt", rich + "\xff"}}, []byte("png\xff"+tok))
	longForm, longFormBody := multipartForm([][2]string{{"model", strings.Repeat(tok, 2000)}, {"prompt", rich}}, []byte("png"))
	unknownForm, unknownFormBody := multipartForm([][2]string{{"model", tok}, {"prompt", rich}}, []byte("png"))
	return []probe{
		// Routing: 404 and 405.
		{name: "404 path", method: "GET", path: "/v1/" + tok, hdr: bearer(key), want: 404},
		{name: "404 under an endpoint", method: "POST", path: "/v1/chat/completions/" + tok, hdr: bearer(key), body: chat("modelb-6-astra", rich), want: 404},
		{name: "404 forged line", method: "GET", path: "/v1/" + tok + "%0A%7B%22level%22:%22ERROR%22%7D", want: 404},
		{name: "404 not relayed", method: "POST", path: "/v1/files/" + tok, hdr: bearer(key), want: 404},
		{name: "405 method", method: tok, path: "/v1/chat/completions", hdr: bearer(key), body: chat("modelb-6-astra", rich), want: 405},
		{name: "405 GET", method: "GET", path: "/v1/responses", hdr: bearer(key), want: 405},
		// 401: keys that carry the canary.
		{name: "401 bogus sk key", method: "POST", path: "/v1/chat/completions", hdr: bearer("sk-" + tok + "-bogus"), body: chat(tok, rich), want: 401},
		{name: "401 not an sk key", method: "POST", path: "/v1/chat/completions", hdr: bearer(tok), body: chat(tok, rich), want: 401},
		{name: "401 no scheme", method: "POST", path: "/v1/chat/completions", hdr: []string{"Authorization", tok}, body: chat(tok, rich), want: 401},
		{name: "401 x-api-key", method: "POST", path: "/v1/messages", hdr: []string{"X-Api-Key", "sk-" + tok + "-bogus"}, body: chat(tok, rich, `"max_tokens":5`), want: 401},
		{name: "401 models", method: "GET", path: "/v1/models", hdr: bearer("sk-" + tok + "-bogus"), want: 401},
		{name: "401 video", method: "GET", path: "/v1/videos/" + tok, hdr: bearer("sk-" + tok + "-bogus"), want: 401},
		{name: "401 admin", method: "GET", path: "/admin/accounts/" + tok, hdr: bearer(tok), want: 401},
		// 429: the second call of a key whose bucket holds one.
		{name: "rate limit: first call", method: "POST", path: "/v1/chat/completions", hdr: bearer(tightKey), body: chat(tok, rich), want: 403},
		{name: "429 rate limit", method: "POST", path: "/v1/chat/completions", hdr: bearer(tightKey), body: chat(tok, rich), want: 429},
		// 400: decoding.
		{name: "400 syntax", method: "POST", path: "/v1/chat/completions", hdr: bearer(key), body: []byte(`{"model":` + q(rich) + `, ` + tok + `}`), want: 400},
		{name: "400 type", method: "POST", path: "/v1/chat/completions", hdr: bearer(key), body: []byte(`{"model":` + q(rich) + `,"messages":` + q(rich) + `}`), want: 400},
		{name: "400 role", method: "POST", path: "/v1/chat/completions", hdr: bearer(key), body: []byte(`{"model":` + q(rich) + `,"messages":[{"role":` + q(rich) + `,"content":` + q(rich) + `}]}`), want: 400},
		{name: "400 responses input", method: "POST", path: "/v1/responses", hdr: bearer(key), body: []byte(`{"model":` + q(rich) + `,"input":{"x":` + q(rich) + `}}`), want: 400},
		{name: "400 messages version", method: "POST", path: "/v1/messages", hdr: hdr([]string{"X-Api-Key", key}, []string{"Anthropic-Version", ""}), body: chat("modela-opus-5-5", rich, `"max_tokens":5`), want: 400},
		{name: "400 systemone question", method: "POST", path: "/v1/systemone", hdr: bearer(key), body: []byte(`{"model":"sysmodel-latest","state":` + q(rich) + `,"questions":{` + q(rich) + `:[1]}}`), want: 400},
		{name: "400 edit content type", method: "POST", path: "/v1/images/edits", hdr: hdr(bearer(key), []string{"Content-Type", "text/" + tok}), body: []byte(rich), want: 400},
		// 400: not UTF-8.
		// (json.Marshal would replace the bad bytes: these are written raw.)
		{name: "400 UTF-8 chat", method: "POST", path: "/v1/chat/completions", hdr: bearer(key), body: []byte(`{"model":"modelb-6-astra","messages":[{"role":"user","content":"` + tok + "\xff" + `"}]}`), want: 400},
		{name: "400 UTF-8 model", method: "POST", path: "/v1/chat/completions", hdr: bearer(key), body: []byte(`{"model":"` + tok + "\xc3" + `","messages":[{"role":"user","content":` + q(rich) + `}]}`), want: 400},
		{name: "400 UTF-8 form", method: "POST", path: "/v1/images/edits", hdr: hdr(bearer(key), []string{"Content-Type", utf8Form}), body: utf8FormBody, want: 400},
		// 400: a model id over the limit.
		{name: "400 long model", method: "POST", path: "/v1/chat/completions", hdr: bearer(key), body: chat(longModel, rich), want: 400},
		{name: "400 long model messages", method: "POST", path: "/v1/messages", hdr: []string{"X-Api-Key", key}, body: chat(longModel, rich, `"max_tokens":5`), want: 400},
		{name: "400 long model form", method: "POST", path: "/v1/images/edits", hdr: hdr(bearer(key), []string{"Content-Type", longForm}), body: longFormBody, want: 400},
		// 403: a model not sold here.
		{name: "403 unknown model", method: "POST", path: "/v1/chat/completions", hdr: bearer(key), body: chat(rich, rich), want: 403},
		{name: "403 unknown model messages", method: "POST", path: "/v1/messages", hdr: []string{"X-Api-Key", key}, body: chat(tok, rich, `"max_tokens":5`), want: 403},
		{name: "403 unknown model form", method: "POST", path: "/v1/images/edits", hdr: hdr(bearer(key), []string{"Content-Type", unknownForm}), body: unknownFormBody, want: 403},
		// 402: an account without credit.
		{name: "402 no credit", method: "POST", path: "/v1/chat/completions", hdr: bearer(poorKey), body: chat("modelb-6-astra", rich), want: 402},
		// 400: a plugin's validation, which quotes the value.
		{name: "400 plugin size", method: "POST", path: "/v1/images/generations", hdr: bearer(key), body: []byte(`{"model":"modelb-image-2.5-flare","prompt":` + q(rich) + `,"size":` + q(rich) + `}`), want: 400},
		{name: "400 plugin video", method: "POST", path: "/v1/videos/generations", hdr: bearer(key), body: []byte(`{"model":"modelc-imagine-video-1.5","prompt":` + q(rich) + `,"resolution":` + q(rich) + `}`), want: 400},
		{name: "400 plugin question", method: "POST", path: "/v1/systemone", hdr: bearer(key), body: []byte(`{"model":"sysmodel-latest","state":` + q(rich) + `,"questions":{` + q(tok) + `:{"type":` + q(rich) + `}}}`), want: 400},
		{name: "400 plugin form size", method: "POST", path: "/v1/images/edits", hdr: hdr(bearer(key), []string{"Content-Type", badForm}), body: badFormBody, want: 400},
		// 404: ids in paths.
		{name: "404 video job", method: "GET", path: "/v1/videos/" + tok, hdr: bearer(key), want: 404},
		{name: "404 video content", method: "GET", path: "/v1/videos/" + tok + "/content", hdr: bearer(key), want: 404},
		{name: "404 admin account", method: "GET", path: "/admin/accounts/" + tok, hdr: bearer(testAdminToken), want: 404},
		{name: "404 admin charges", method: "GET", path: "/admin/accounts/" + tok + "/charges", hdr: bearer(testAdminToken), want: 404},
		// Public and ops endpoints.
		{name: "pricing", method: "GET", path: "/api/pricing", want: 200},
		{name: "healthz", method: "GET", path: "/healthz", want: 200},
	}
}

// canarySuccessProbes are calls carrying the canary that succeed.
func canarySuccessProbes(c canary, key string) []probe {
	rich, q, chat, hdr := c.rich, quoteJSON, c.chat, headers
	tok := c.tok
	okForm, okFormBody := multipartForm([][2]string{{"model", "modelb-image-2.5-sunburst"}, {"prompt", "please repeat " + rich}, {"user", rich}}, []byte("png "+tok))
	return []probe{
		{name: "200 chat", method: "POST", path: "/v1/chat/completions", hdr: bearer(key), body: chat("modelb-6-astra", "please repeat "+rich, `"max_tokens":64`), want: 200},
		{name: "200 chat stream", method: "POST", path: "/v1/chat/completions", hdr: bearer(key), body: chat("modelb-6-astra", "please repeat "+rich, `"stream":true`), want: 200},
		{name: "200 responses stream", method: "POST", path: "/v1/responses", hdr: bearer(key), body: []byte(`{"model":"modelb-6-astra","input":` + q("please repeat "+rich) + `,"stream":true,"user":` + q(rich) + `}`), want: 200},
		{name: "200 messages", method: "POST", path: "/v1/messages", hdr: hdr([]string{"X-Api-Key", key}, []string{"Anthropic-Version", "2023-06-01"}), body: chat("modela-opus-5-5", "please repeat "+rich, `"max_tokens":64`), want: 200},
		{name: "200 messages stream", method: "POST", path: "/v1/messages", hdr: hdr([]string{"X-Api-Key", key}, []string{"Anthropic-Version", "2023-06-01"}), body: chat("modela-opus-5-5", "please repeat "+rich, `"max_tokens":64`, `"stream":true`), want: 200},
		{name: "200 images", method: "POST", path: "/v1/images/generations", hdr: bearer(key), body: []byte(`{"model":"modelb-image-2.5-flare","prompt":` + q(rich) + `,"user":` + q(rich) + `}`), want: 200},
		{name: "200 image edit", method: "POST", path: "/v1/images/edits", hdr: hdr(bearer(key), []string{"Content-Type", okForm}), body: okFormBody, want: 200},
		{name: "200 video", method: "POST", path: "/v1/videos/generations", hdr: bearer(key), body: []byte(`{"model":"modelc-imagine-video-1.5","prompt":` + q(rich) + `,"user":` + q(rich) + `}`), want: 200},
		{name: "200 systemone", method: "POST", path: "/v1/systemone", hdr: bearer(key), body: []byte(`{"model":"sysmodel-latest","state":` + q(rich) + `,"questions":{` + q(tok) + `:{"type":"noul","instructions":` + q(rich) + `}}}`), want: 200},
		{name: "200 models", method: "GET", path: "/v1/models", hdr: bearer(key), want: 200},
	}
}

// canaryCheck sends the canary test's probes and checks their answers.
type canaryCheck struct {
	t      *testing.T
	url    string
	tok    string
	echoed int // error bodies that quote the canary
}

// check sends p and wants its status; an error body must be bounded and
// end with the request id.
func (ck *canaryCheck) check(p probe) []byte {
	t := ck.t
	t.Helper()
	st, rid, data := sendProbe(t, ck.url, ck.tok, p)
	if st != p.want {
		t.Errorf("%s: status %d, want %d: %.300s", p.name, st, p.want, data)
	}
	if st >= 400 {
		// An error body never amplifies: whatever it echoes is bounded.
		if len(data) > 2048 {
			t.Errorf("%s: a %d-byte error body", p.name, len(data))
		}
		msg, _, _ := errBody(t, data)
		if rid == "" || !strings.Contains(msg, rid) {
			t.Errorf("%s: the message does not end with the request id %q: %s", p.name, rid, msg)
		}
		if strings.Contains(msg, ck.tok) {
			ck.echoed++
		}
	}
	return data
}

// checkCanarySuccesses sends the calls that succeed: a chat completion
// echoes the canary (so it reached the provider), and the video job's
// status is read too.
func checkCanarySuccesses(ck *canaryCheck, c canary, key string) {
	t := ck.t
	t.Helper()
	for _, p := range canarySuccessProbes(c, key) {
		data := ck.check(p)
		if strings.HasPrefix(p.name, "200 chat") && !strings.Contains(string(data), c.tok) {
			t.Errorf("%s: the completion does not echo the canary, so it never reached the provider: %.200s", p.name, data)
		}
		if p.name == "200 video" {
			var job struct {
				RequestID string `json:"request_id"`
			}
			if err := json.Unmarshal(data, &job); err != nil || job.RequestID == "" {
				t.Fatalf("video job: %s", data)
			}
			ck.check(probe{name: "200 video status", method: "GET", path: "/v1/videos/" + job.RequestID, hdr: bearer(key), want: 200})
		}
	}
}

// provokeProviderFailures makes the provider fail: 5xx on every try (→
// 503, logged), a 501 passed on (logged by its status), a stream cut
// midway.
func provokeProviderFailures(ck *canaryCheck, e *env, c canary, key string) {
	ck.t.Helper()
	setSims := func(o sim.Options) {
		for _, s := range e.sims {
			s.SetOptions(o)
		}
	}
	setSims(sim.Options{Status: 500})
	ck.check(probe{name: "503 upstream 500", method: "POST", path: "/v1/chat/completions", hdr: bearer(key), body: c.chat("modelb-6-astra", c.rich), want: 503})
	setSims(sim.Options{Status: 501})
	ck.check(probe{name: "501 upstream", method: "POST", path: "/v1/chat/completions", hdr: bearer(key), body: c.chat("modelb-6-astra", c.rich), want: 501})
	setSims(sim.Options{CutAfter: 2})
	sendProbe(ck.t, e.url, c.tok, probe{name: "cut stream", method: "POST", path: "/v1/chat/completions", hdr: bearer(key), body: c.chat("modelb-6-astra", c.rich, `"stream":true`)})
	setSims(sim.Options{})
}

// probeDeadLine calls through a gateway whose line cannot be reached: its
// error (which would quote the target, and with it the query string) is
// in the 503 and the log. It returns that gateway and its key.
func probeDeadLine(t *testing.T, c canary) (*env, string) {
	t.Helper()
	dead := newEnv(t, func(c *config.Config) { c.Lines[0].BaseURL = "http://127.0.0.1:1" })
	dead.account("acme", "5")
	deadKey := dead.key("acme", "standard")
	st, _, data := sendProbe(t, dead.url, c.tok, probe{name: "503 dead line", method: "POST", path: "/v1/chat/completions", hdr: bearer(deadKey), body: c.chat("modelb-6-astra", c.rich)})
	if st != 503 || !strings.Contains(string(data), "std-a") {
		t.Errorf("dead line: %d %s", st, data)
	}
	return dead, deadKey
}

// A 15 MB model id is a 400 of a few hundred bytes and costs the log a
// line of ordinary size, on every endpoint that reads a model.
func TestHugeModelID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "auto")
	model := strings.Repeat("m", 15<<20)
	form, formBody := multipartForm([][2]string{{"model", strings.Repeat("m", 60<<10)}, {"prompt", "x"}}, []byte("png"))
	for _, tc := range []struct {
		name, path string
		body       []byte
		hdr        []string
		size       int
	}{
		{"chat", "/v1/chat/completions", []byte(chatBody(model, "hi")), nil, 15 << 20},
		{"responses", "/v1/responses", []byte(`{"model":"` + model + `","input":"hi"}`), nil, 15 << 20},
		{"messages", "/v1/messages", []byte(`{"model":"` + model + `","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`), []string{"Anthropic-Version", "2023-06-01"}, 15 << 20},
		{"images", "/v1/images/generations", []byte(`{"model":"` + model + `","prompt":"x"}`), nil, 15 << 20},
		{"video", "/v1/videos/generations", []byte(`{"model":"` + model + `","prompt":"x"}`), nil, 15 << 20},
		{"edit", "/v1/images/edits", formBody, []string{"Content-Type", form}, 60 << 10},
	} {
		before := len(e.logs.String())
		st, h, data := e.do("POST", tc.path, key, tc.body, tc.hdr...)
		msg, _, code := errBody(t, data)
		want := fmt.Sprintf("the model id is %d bytes; the limit is %d", tc.size, maxModelID)
		if st != 400 || code != "invalid_model" || !strings.Contains(msg, want) {
			t.Errorf("%s: %d %v %q", tc.name, st, code, msg)
		}
		if len(data) > 512 {
			t.Errorf("%s: a %d-byte error body", tc.name, len(data))
		}
		rid := h.Get("X-Request-Id")
		logs := e.logs.String()[before:]
		if !strings.Contains(logs, rid) {
			t.Fatalf("%s: no log line for %s", tc.name, rid)
		}
		for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
			if len(line) > 512 {
				t.Errorf("%s: a %d-byte log line: %.200s", tc.name, len(line), line)
			}
			if strings.Contains(line, `"model"`) {
				t.Errorf("%s: a refused model id is logged: %.200s", tc.name, line)
			}
		}
	}
	// Under the limit, an unknown id is echoed only in part.
	st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody(strings.Repeat("x", maxModelID), "hi"))
	if msg, _, _ := errBody(t, data); st != 403 || !strings.Contains(msg, fmt.Sprintf("…(%d bytes)", maxModelID)) || len(data) > 512 {
		t.Errorf("256-byte unknown model: %d %s", st, data)
	}
	// A very long path is a small 404.
	st, _, data = e.do("GET", "/v1/"+strings.Repeat("p", 500<<10), key, nil)
	if st != 404 || len(data) > 512 {
		t.Errorf("long path: %d, %d bytes", st, len(data))
	}
}

// A body that is not UTF-8 is 400 invalid_body naming the offset, before
// anything is held or sent; an image edit's file part may hold any bytes,
// its text fields may not.
func TestInvalidUTF8(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "auto")
	prefix := `{"model":"modelb-6-astra","messages":[{"role":"user","content":"caf`
	for _, tc := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", prefix + "\xe9\"}]}"},
		{"responses", "/v1/responses", `{"model":"modelb-6-astra","input":"` + "\xff" + `"}`},
		{"messages", "/v1/messages", `{"model":"modela-opus-5-5","max_tokens":5,"messages":[{"role":"user","content":"` + "\xed\xa0\x80" + `"}]}`},
		{"systemone", "/v1/systemone", `{"model":"sysmodel-latest","state":"s","questions":{"q` + "\xc3" + `":{"type":"noul"}}}`},
	} {
		st, _, data := e.do("POST", tc.path, key, tc.body, "Anthropic-Version", "2023-06-01")
		msg, _, code := errBody(t, data)
		at := apierr.InvalidUTF8At([]byte(tc.body))
		if st != 400 || code != "invalid_body" || !strings.Contains(msg, fmt.Sprintf("the request body is not valid UTF-8 (first invalid byte at offset %d)", at)) {
			t.Errorf("%s: %d %v %q", tc.name, st, code, msg)
		}
	}
	if at := apierr.InvalidUTF8At([]byte(prefix + "\xe9")); at != len(prefix) {
		t.Fatalf("offset %d, want %d", at, len(prefix))
	}
	// A text field of an edit form.
	ct, body := multipartForm([][2]string{{"model", "modelb-image-2.5-sunburst"}, {"prompt", "a h\xe2t"}}, []byte("png"))
	st, _, data := e.do("POST", "/v1/images/edits", key, body, "Content-Type", ct)
	if msg, _, code := errBody(t, data); st != 400 || code != "invalid_prompt" || !strings.Contains(msg, "the form field prompt is not valid UTF-8 (first invalid byte at offset 3)") {
		t.Errorf("edit prompt: %d %v %q", st, code, msg)
	}
	// Nothing was held or sent.
	if b := e.balance("acme"); b.Held != 0 || b.Balance != 5_000_000_000 {
		t.Errorf("balance %+v", b)
	}
	for name, s := range e.sims {
		if n := s.Requests(); n != 0 {
			t.Errorf("line %s saw %d requests", name, n)
		}
	}
	// A file part is bytes: any bytes.
	ct, body = multipartForm([][2]string{{"model", "modelb-image-2.5-sunburst"}, {"prompt", "a hat"}}, []byte("\x89PNG\r\n\x1a\n\xff\xfe\x00"))
	if st, _, data := e.do("POST", "/v1/images/edits", key, body, "Content-Type", ct); st != 200 {
		t.Errorf("binary image: %d %s", st, data)
	}
	// Valid UTF-8 of every width passes.
	if st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelb-6-astra", "café ü 漢字 😀 \u2028")); st != 200 {
		t.Errorf("valid UTF-8: %d %s", st, data)
	}
}
