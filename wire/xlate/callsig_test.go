package xlate

import (
	"encoding/json"
	"strings"
	"testing"
)

// A Gemini answer with a thought and a signed function call, streamed in
// two chunks and whole.
var (
	gemSignedChunks = []string{
		`{"candidates":[{"content":{"parts":[{"text":"Thinking it over.","thought":true},{"text":"Calling."}],"role":"model"}}],"responseId":"r1","modelVersion":"g"}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_weather","args":{"location":"Paris"}},"thoughtSignature":"sig+A/b=="}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":20,"candidatesTokenCount":12},"responseId":"r1"}`,
	}
	gemSignedAnswer = `{"candidates":[{"content":{"role":"model","parts":[{"text":"Thinking it over.","thought":true},{"text":"Calling."},` +
		`{"functionCall":{"name":"get_weather","args":{"location":"Paris"}},"thoughtSignature":"sig+A/b=="}]},"finishReason":"STOP"}],` +
		`"usageMetadata":{"promptTokenCount":20,"candidatesTokenCount":12},"responseId":"r1","modelVersion":"g"}`
)

const gemSignedSig = "sig+A/b=="

// gemStreamTo translates gemSignedChunks into the caller's stream.
func gemStreamTo(t *testing.T, to Shape) string {
	t.Helper()
	s, err := NewStream(Gemini, to, &Request{Model: "m", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, c := range gemSignedChunks {
		b, err := s.Event("", []byte(c))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	b, err := s.End()
	if err != nil {
		t.Fatal(err)
	}
	return string(append(out, b...))
}

// A streamed Gemini call's signature reaches a chat caller in the call's
// extra_content: the Gemini decoder gave it after the arguments, when the
// chat encoder had already written the call's start, and it was lost.
func TestGemStreamCallSignatureToChat(t *testing.T) {
	out := gemStreamTo(t, Chat)
	if !strings.Contains(out, `"id":"call_0","type":"function","function":{"name":"get_weather","arguments":""},"extra_content":{"google":{"thought_signature":"sig+A/b=="}}`) {
		t.Errorf("the call's start carries no signature:\n%s", out)
	}
}

// checkGemSigned: the Gemini request holds the call, signed, and its
// result, both under the call's own id.
func checkGemSigned(t *testing.T, what string, body []byte) {
	t.Helper()
	type fn struct{ ID, Name string }
	var w struct {
		Contents []struct {
			Parts []struct {
				FunctionCall     *fn    `json:"functionCall"`
				FunctionResponse *fn    `json:"functionResponse"`
				ThoughtSignature string `json:"thoughtSignature"`
			}
		}
	}
	if err := json.Unmarshal(body, &w); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	var call, result bool
	for _, c := range w.Contents {
		for _, p := range c.Parts {
			if p.FunctionCall != nil {
				call = *p.FunctionCall == fn{"call_0", "get_weather"} && p.ThoughtSignature == gemSignedSig
			}
			if p.FunctionResponse != nil {
				result = *p.FunctionResponse == fn{"call_0", "get_weather"}
			}
		}
	}
	if !call || !result {
		t.Errorf("%s: the signed call and its result did not come back to Gemini as they were (call %v, result %v):\n%s", what, call, result, body)
	}
}

// A messages caller has no field for a call's signature: it gets it in
// the tool_use id (streamed and whole), and the id it sends back, on the
// call and on its result, gives Gemini the call signed under its own id.
func TestGemCallSignatureThroughMessages(t *testing.T) {
	want := callIDWithSig("call_0", gemSignedSig)
	if !strings.HasPrefix(want, "call_0__ts_") || strings.ContainsAny(want[len("call_0"):], "+/=") {
		t.Fatalf("id %q is not call_0 and the signature in base64url", want)
	}
	if out := gemStreamTo(t, Messages); !strings.Contains(out, `"content_block":{"type":"tool_use","id":"`+want+`","name":"get_weather"`) {
		t.Errorf("streamed tool_use id is not %q:\n%s", want, out)
	}
	ans, err := TranslateAnswer(Gemini, Messages, []byte(gemSignedAnswer), &Request{Model: "m"})
	if err != nil || !strings.Contains(string(ans), `{"type":"tool_use","id":"`+want+`"`) {
		t.Errorf("tool_use id is not %q: %v %s", want, err, ans)
	}
	body := `{"model":"m","max_tokens":100,"thinking":{"type":"adaptive"},"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[` +
		`{"role":"user","content":"weather?"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"Thinking it over.","signature":""},{"type":"text","text":"Calling."},{"type":"tool_use","id":"` + want + `","name":"get_weather","input":{"location":"Paris"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + want + `","content":"sunny"}]}]}`
	r, err := ParseRequest(Messages, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	out, err := BuildRequest(Gemini, r)
	if err != nil {
		t.Fatal(err)
	}
	checkGemSigned(t, "messages", out)
}

// The same for a responses caller, in the function_call's call_id.
func TestGemCallSignatureThroughResponses(t *testing.T) {
	want := callIDWithSig("call_0", gemSignedSig)
	if out := gemStreamTo(t, Responses); !strings.Contains(out, `"call_id":"`+want+`","name":"get_weather"`) {
		t.Errorf("streamed call_id is not %q:\n%s", want, out)
	}
	ans, err := TranslateAnswer(Gemini, Responses, []byte(gemSignedAnswer), &Request{Model: "m"})
	if err != nil || !strings.Contains(string(ans), `"call_id":"`+want+`"`) {
		t.Errorf("call_id is not %q: %v %s", want, err, ans)
	}
	body := `{"model":"m","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}],"input":[` +
		`{"role":"user","content":"weather?"},` +
		`{"type":"function_call","call_id":"` + want + `","name":"get_weather","arguments":"{\"location\":\"Paris\"}"},` +
		`{"type":"function_call_output","call_id":"` + want + `","output":"sunny"}]}`
	r, err := ParseRequest(Responses, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	out, err := BuildRequest(Gemini, r)
	if err != nil {
		t.Fatal(err)
	}
	checkGemSigned(t, "responses", out)
}

// Ids without a signature, or with what only looks like one, are kept.
func TestSplitCallID(t *testing.T) {
	for _, id := range []string{"toolu_01A", "call_abc", "a__ts_", "a__ts_!!", "fc__ts_x y", ""} {
		if got, sig := splitCallID(id); got != id || sig != "" {
			t.Errorf("splitCallID(%q) = %q, %q", id, got, sig)
		}
	}
	for _, sig := range []string{"s", "simsig_0123456789abcdef", "EpQFCpEFAdHtim9x2W0Jb5m0rQ3VnS1Yq8pT3zL0cQ==", "a__ts_b"} {
		if id, got := splitCallID(callIDWithSig("call_1", sig)); id != "call_1" || got != sig {
			t.Errorf("round trip of %q: %q, %q", sig, id, got)
		}
	}
}
