package sim

import (
	"net/http"
	"strings"
	"testing"
)

// googleErrBody is Google's error shape.
type googleErrBody struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

// errorMessage decodes the error body of path's shape and returns its
// message, failing when the body is not in that shape.
func errorMessage(t *testing.T, path string, status int, b []byte) string {
	t.Helper()
	switch {
	case strings.HasPrefix(path, "/v1beta/"):
		e := decode[googleErrBody](t, b)
		if e.Error.Code != status || e.Error.Status == "" {
			t.Fatalf("not a Google error of %d: %s", status, b)
		}
		return e.Error.Message
	case strings.HasPrefix(path, "/v1/messages"):
		e := decode[anthErrBody](t, b)
		if e.Type != "error" || e.Error.Type == "" {
			t.Fatalf("not an Anthropic error: %s", b)
		}
		return e.Error.Message
	}
	e := decode[errBody](t, b)
	if e.Error.Type == "" {
		t.Fatalf("not an OpenAI error: %s", b)
	}
	return e.Error.Message
}

const (
	rtModel = "modela-opus-5-5"
	rtUser  = `{"role":"user","content":"go"}`
	rtTools = `"tools":[{"name":"read","input_schema":{"type":"object"}}]`
)

// rtMessages is a messages request whose assistant turn is blocks,
// answered by one tool_result.
func rtMessages(thinking, blocks string) string {
	return `{"model":"` + rtModel + `","max_tokens":4096,` + thinking + rtTools + `,"messages":[` + rtUser +
		`,{"role":"assistant","content":[` + blocks + `]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}]}`
}

const rtToolUse = `{"type":"tool_use","id":"toolu_1","name":"read","input":{}}`

func thinkingBlock(text, sig string) string {
	return `{"type":"thinking","thinking":"` + text + `","signature":"` + sig + `"},`
}

// TestRoundTripChecks sends back, in each protocol, what the sim answered
// (accepted) and what it could not have answered (400 in the protocol's
// error shape, naming the field); the usage helpers agree.
func TestRoundTripChecks(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	enabled := `"thinking":{"type":"enabled","budget_tokens":2048},`
	good := thinkingBlock("I read.", Signature(rtModel, "I read."))
	respIn := func(items string) string {
		return `{"model":"modelc-4.7","input":[{"role":"user","content":"go"},` + items + `]}`
	}
	gemini := func(model string) string {
		return `{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[` + model +
			`]},{"role":"user","parts":[{"functionResponse":{"name":"read","response":{"r":1}}}]}]}`
	}
	geminiThinking := func(model string) string {
		return strings.TrimSuffix(gemini(model), "}") + `,"generationConfig":{"thinkingConfig":{"includeThoughts":true}}}`
	}
	const gpath = "/v1beta/models/modelf-flash:generateContent"
	cases := []struct {
		name, path, body string
		status           int
		msg              string
	}{
		{"messages signed thinking", "/v1/messages", rtMessages(enabled, good+rtToolUse), 200, ""},
		{"messages tampered thinking", "/v1/messages", rtMessages(enabled, thinkingBlock("I read it.", Signature(rtModel, "I read."))+rtToolUse), 400,
			"messages.1.content.0: Invalid `signature` in `thinking` block"},
		{"messages signature of another model", "/v1/messages", rtMessages("", thinkingBlock("I read.", Signature("modela-fable-5-1", "I read."))+rtToolUse), 400,
			"messages.1.content.0: Invalid `signature`"},
		{"messages enabled, tool_use turn without thinking", "/v1/messages", rtMessages(enabled, `{"type":"text","text":"x"},`+rtToolUse), 400,
			"messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`. When `thinking` is enabled, a final `assistant` message must start with a thinking block"},
		{"messages enabled, redacted thinking first", "/v1/messages", rtMessages(enabled, `{"type":"redacted_thinking","data":"x"},`+rtToolUse), 200, ""},
		{"messages adaptive, no thinking", "/v1/messages", rtMessages(`"thinking":{"type":"adaptive"},`, rtToolUse), 200, ""},
		{"messages thinking off, no thinking", "/v1/messages", rtMessages("", rtToolUse), 200, ""},
		{"messages orphan tool_result", "/v1/messages", `{"model":"` + rtModel + `","max_tokens":9,"messages":[` + rtUser +
			`,{"role":"assistant","content":"x"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"toolu_9","content":"ok"}]}]}`, 400,
			"messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9"},
		{"chat tool result of a call", "/v1/chat/completions", `{"model":"modelf-flash","messages":[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"ok"}]}`, 200, ""},
		{"chat orphan tool result", "/v1/chat/completions", `{"model":"modelf-flash","messages":[{"role":"user","content":"go"},{"role":"tool","tool_call_id":"call_1","content":"ok"}]}`, 400,
			"messages[1].tool_call_id: \"call_1\" matches no tool call"},
		{"responses orphan output", "/v1/responses", respIn(`{"type":"function_call_output","call_id":"call_9","output":"ok"}`), 400,
			"input[1].call_id: No tool call found for function call output with call_id call_9"},
		{"responses output after previous_response_id", "/v1/responses", `{"model":"modelc-4.7","previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"call_9","output":"ok"}]}`, 200, ""},
		{"responses output after a compaction", "/v1/responses", respIn(`{"type":"compaction","encrypted_content":"x"},{"type":"function_call_output","call_id":"call_9","output":"ok"}`), 200, ""},
		{"responses foreign reasoning", "/v1/responses", respIn(`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAAB"}`), 400,
			"input[1].encrypted_content: The encrypted content for item rs_1 could not be verified."},
		{"responses sim reasoning", "/v1/responses", respIn(`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"simenc_00"},{"type":"reasoning","summary":[],"encrypted_content":null}`), 200, ""},
		{"gemini signed call", gpath, gemini(`{"functionCall":{"name":"read","args":{}},"thoughtSignature":"simsig_1"}`), 200, ""},
		{"gemini foreign signature", gpath, gemini(`{"functionCall":{"name":"read","args":{}},"thought_signature":"CiQB"}`), 400,
			"contents[1].parts[0].thoughtSignature: Thought signature is not valid."},
		{"gemini thinking, unsigned call of the current turn", gpath, geminiThinking(`{"functionCall":{"name":"read","args":{}}}`), 400,
			"Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly. Additional data, function call `read`, position contents[1].parts[0]."},
		{"gemini thinking, first call signed", gpath, geminiThinking(`{"text":"x"},{"functionCall":{"name":"read","args":{}},"thoughtSignature":"simsig_1"},{"functionCall":{"name":"read","args":{}}}`), 200, ""},
		{"gemini thinking, unsigned call of an earlier turn", gpath, `{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"read","args":{}}}]},` +
			`{"role":"user","parts":[{"functionResponse":{"name":"read","response":{"r":1}}}]},{"role":"model","parts":[{"text":"done"}]},{"role":"user","parts":[{"text":"again"}]}],` +
			`"generationConfig":{"thinkingConfig":{"thinkingBudget":1024}}}`, 200, ""},
		{"gemini thinking off, unsigned call", gpath, gemini(`{"functionCall":{"name":"read","args":{}}}`), 200, ""},
		{"gemini response to no call", gpath, gemini(`{"functionCall":{"name":"list","args":{}}}`), 400,
			"contents[2].parts[0].functionResponse.name: \"read\" is the name of no earlier functionCall"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, http.MethodPost, tc.path, tc.body, anthropicHdr)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			var err error
			switch {
			case strings.HasPrefix(tc.path, "/v1beta/"):
				_, err = GeminiUsage([]byte(tc.body))
			case tc.path == "/v1/messages":
				_, err = MessagesUsage([]byte(tc.body))
			case tc.path == "/v1/responses":
				_, err = ResponsesUsage([]byte(tc.body))
			default:
				_, err = ChatUsage([]byte(tc.body))
			}
			if (err == nil) != (status == 200) {
				t.Fatalf("the usage helper says %v", err)
			}
			if status != 200 {
				if msg := errorMessage(t, tc.path, status, b); !strings.HasPrefix(msg, tc.msg) || err.Error() != msg {
					t.Fatalf("message %q, want it to start %q (helper: %v)", msg, tc.msg, err)
				}
			}
		})
	}
}
