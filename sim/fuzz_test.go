package sim

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// serveBody runs one request through a Server without a network.
func serveBody(s *Server, path, ctype string, body []byte, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

// checkAnswer checks a fuzzed answer: no 5xx, a JSON or SSE body, and
// usage that agrees with the helper when it is a JSON success.
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder, usageErr error) {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body.Bytes())
	}
	if (rec.Code == http.StatusOK) != (usageErr == nil) {
		t.Fatalf("status %d but the usage helper says %v", rec.Code, usageErr)
	}
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") && !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("invalid JSON answer: %s", rec.Body.Bytes())
	}
}

func FuzzChatRequest(f *testing.F) {
	for _, seed := range []string{
		chatBody, chatStream,
		`{"model":"modelb-6-astra","max_tokens":3,"messages":[{"role":"user","content":[{"type":"text","text":"a\u2028b"},{"type":"image_url"}]}]}`,
		`{"model":"modele-k3","messages":[{"role":"user","content":null}],"max_completion_tokens":-1}`,
		string(chatProto.body([]lTurn{{role: "user", text: loopScript}}, true, chatProto.think)),
		`{"model":"modelf-flash","reasoning_effort":"high","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"sim:call f {}"},{"role":"assistant","tool_calls":[{"id":"c"}]},{"role":"tool","tool_call_id":"c"}]}`,
		`{"model":"x"}`, `[]`, `{"messages":[1]}`, "", "\xff",
	} {
		f.Add([]byte(seed))
	}
	s := New(Options{Chunks: 3})
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := ChatUsage(body)
		rec := serveBody(s, "/v1/chat/completions", "application/json", body, nil)
		checkAnswer(t, rec, err)
		if err != nil || rec.Header().Get("Content-Type") != "application/json" {
			return
		}
		var got chatCompletion
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if got.Usage.PromptTokens != c.Prompt || got.Usage.CompletionTokens != c.Completion || c.Prompt < 0 || c.Completion < 1 {
			t.Fatalf("usage %+v, helper %+v", got.Usage, c)
		}
	})
}

func FuzzResponsesRequest(f *testing.F) {
	for _, seed := range []string{
		respStream, `{"model":"modelc-4.7","input":[{"role":"user","content":"x"},{"type":"reasoning"}],"max_output_tokens":2}`,
		`{"model":"modelc-4.7","input":[1]}`, `{"model":"modelc-4.7","input":{"a":1}}`,
		`{"model":"modelc-4.7","stream":true,"input":[{"role":"user","content":"x"},{"type":"compaction_trigger"}]}`,
		string(responsesProto.body([]lTurn{{role: "user", text: loopScript + "sim:calls-parallel"}}, true, responsesProto.think)),
		`{"model":"modelc-4.7","input":[{"type":"reasoning","encrypted_content":"simenc_"},{"type":"function_call_output","call_id":"c"}]}`,
	} {
		f.Add([]byte(seed))
	}
	s := New(Options{Chunks: 2})
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := ResponsesUsage(body)
		checkAnswer(t, serveBody(s, "/v1/responses", "application/json", body, nil), err)
	})
}

func FuzzMessagesRequest(f *testing.F) {
	for _, seed := range []string{
		msgBody, msgStream, cacheReq("modela-fable-5-1", "1h", "a|5m", "b"),
		`{"model":"modela-fable-5-1","max_tokens":1,"system":[{"type":"text","text":"s","cache_control":{"type":"other"}}],"messages":[{"role":"user","content":"x"}]}`,
		string(messagesProto.body([]lTurn{{role: "user", text: loopScript}}, true, messagesProto.think)),
		rtMessages(`"thinking":{"type":"enabled","budget_tokens":2048},`, thinkingBlock("I read.", Signature(rtModel, "I read."))+rtToolUse),
	} {
		f.Add([]byte(seed))
	}
	s := New(Options{Chunks: 2})
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := MessagesUsage(body)
		if err == nil && (c.Prompt < 0 || c.CacheWrite < 0 || c.CacheWrite1h < 0 || c.Cached != 0) {
			t.Fatalf("first-sight counts %+v", c)
		}
		checkAnswer(t, serveBody(s, "/v1/messages", "application/json", body, anthropicHdr), err)
	})
}

func FuzzGeminiRequest(f *testing.F) {
	for _, seed := range []string{
		gemBody, `{"contents":[{"parts":[{"text":"a"}]}],"generationConfig":{"maxOutputTokens":1,"thinkingConfig":{"includeThoughts":true}}}`,
		string(geminiProto.body([]lTurn{{role: "user", text: loopScript}}, false, geminiProto.think)),
		`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f"},"thoughtSignature":"simsig_"}]},{"parts":[{"function_response":{"name":"f"}}]}]}`,
		`{"contents":[]}`, `{"contents":[{"role":"x"}]}`, `[]`, "",
	} {
		f.Add([]byte(seed), false)
	}
	s := New(Options{Chunks: 2})
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		c, err := GeminiUsage(body)
		if err == nil && (c.Prompt < 0 || c.Cached > c.Prompt || c.Completion < 0 || c.Reasoning < 0) {
			t.Fatalf("counts %+v", c)
		}
		path := gemJSON
		if stream {
			path = gemStream
		}
		checkAnswer(t, serveBody(s, path, "application/json", body, nil), err)
	})
}

func FuzzSystemOneRequest(f *testing.F) {
	for _, seed := range []string{
		systemOneReq,
		`{"model":"sysmodel-latest","state":"s","questions":{"a":{"type":"choice","options":["x","y"]},"b":{"type":"score","min":-1}}}`,
		`{"model":"sysmodel-latest","state":"s","questions":{"a":{"type":"choice"}}}`,
	} {
		f.Add([]byte(seed))
	}
	s := New(Options{})
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := SystemOneUsage(body)
		rec := serveBody(s, "/v1/systemone", "application/json", body, nil)
		if rec.Code >= 500 || !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("status %d: %s", rec.Code, rec.Body.Bytes())
		}
		if (rec.Code == http.StatusOK) != (err == nil) {
			t.Fatalf("status %d but SystemOneUsage says %v", rec.Code, err)
		}
	})
}

func FuzzImageEditForm(f *testing.F) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.SetBoundary("fuzzboundary")
	_ = mw.WriteField("model", "modelb-image-2.5-flare")
	_ = mw.WriteField("prompt", "hat")
	_ = mw.WriteField("n", "2")
	fw, _ := mw.CreateFormFile("image", "a.png")
	_, _ = fw.Write(tinyPNG)
	_ = mw.Close()
	f.Add(buf.Bytes())
	f.Add([]byte("--fuzzboundary--\r\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		q, err := parseEditForm(multipart.NewReader(bytes.NewReader(body), "fuzzboundary"))
		if err == nil && q.Model == "" {
			t.Fatalf("accepted a form without a model")
		}
	})
}

func FuzzAppendString(f *testing.F) {
	for _, seed := range []string{"", "a\"b", "\x00\u2028", "\xff\xfe", "日本"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q → %s: %v", s, b, err)
		}
		want, _ := json.Marshal(s)
		var w string
		_ = json.Unmarshal(want, &w)
		if got != w {
			t.Fatalf("%q decodes to %q, encoding/json round-trips to %q", s, got, w)
		}
	})
}

func FuzzCountTokensRequest(f *testing.F) {
	for _, seed := range []string{
		claudeCodeBody, `{"model":"modela-fable-5-1","messages":[{"role":"system","content":"x"}]}`,
		`{"model":"modela-fable-5-1","messages":[]}`, `{"model":"modela-fable-5-1","messages":[{"role":"user","content":[1]}]}`,
	} {
		f.Add([]byte(seed))
	}
	s := New(Options{})
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := CountTokens(body)
		rec := serveBody(s, "/v1/messages/count_tokens", "application/json", body, anthropicHdr)
		checkAnswer(t, rec, err)
		if err == nil && rec.Body.String() != `{"input_tokens":`+itoa(n)+`}` {
			t.Fatalf("answer %s, helper %d", rec.Body.Bytes(), n)
		}
	})
}

func FuzzCompactRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"modelb-6-astra","input":[{"role":"user","content":"x"},{"type":"reasoning","content":null}]}`,
		`{"model":"modelc-4.7","input":"x","instructions":"y"}`, `{"model":"modelc-4.7"}`,
		`{"model":"modelc-4.7","input":[{"role":"user","content":[{"type":"input_text","text":"a"}]},{"role":"user","content":7}]}`,
	} {
		f.Add([]byte(seed))
	}
	s := New(Options{})
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := CompactUsage(body)
		rec := serveBody(s, "/v1/responses/compact", "application/json", body, nil)
		checkAnswer(t, rec, err)
		if err != nil {
			return
		}
		var got compaction
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Usage == nil {
			t.Fatalf("answer %s: %v", rec.Body.Bytes(), err)
		}
		if got.Usage.InputTokens != c.Prompt || got.Usage.OutputTokens != CompactTokens || got.Output[len(got.Output)-1].Type != "compaction" {
			t.Fatalf("answer %s, helper %+v", rec.Body.Bytes(), c)
		}
	})
}
