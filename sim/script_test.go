package sim

import (
	"net/http"
	"strings"
	"testing"
)

func TestScriptLines(t *testing.T) {
	t.Parallel()
	var sc script
	sc.scan("intro sim:call a {}\nsim:call read {\"p\": 1}\r\n\tsim:call\tlist\nsim:callx {}\nsim:call bad [1]\nsim:call bad {\"x\"\nsim:call\nsim:calls-parallel\n")
	want := []scriptLine{{"read", `{"p":1}`}, {"list", `{}`}}
	if len(sc.calls) != len(want) || !sc.parallel {
		t.Fatalf("script %+v", sc)
	}
	for i := range want {
		if sc.calls[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, sc.calls[i], want[i])
		}
	}
}

// TestScriptedAnswers covers what the loop test does not: a tool not
// offered, tool_choice none, no tools, a Claude Code tool_result turn with
// text beside it, Gemini ids, and a second user turn.
func TestScriptedAnswers(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	chatTools := `"tools":[{"type":"function","function":{"name":"read"}}]`
	script := `"sim:call read {}\nsim:call write {}"`
	msgUser := `{"role":"user","content":[{"type":"text","text":"sim:call read {}\nsim:call write {}"}]}`
	cases := []struct {
		name, path, body string
		text             string // the answer's text, "" for the usual reply
		calls            []string
		parse            func(*testing.T, []byte) lAnswer
	}{
		{"chat: a tool not offered", "/v1/chat/completions",
			`{"model":"modelf-flash",` + chatTools + `,"messages":[{"role":"user","content":"sim:call write {}"}]}`,
			"Tool write is not offered.", nil, chatProto.parseJSON},
		{"chat: parallel with one not offered", "/v1/chat/completions",
			`{"model":"modelf-flash",` + chatTools + `,"messages":[{"role":"user","content":"sim:calls-parallel\n` + strings.Trim(script, `"`) + `"}]}`,
			"Tool write is not offered.", nil, chatProto.parseJSON},
		{"chat: tool_choice none", "/v1/chat/completions",
			`{"model":"modelf-flash","tool_choice":"none",` + chatTools + `,"messages":[{"role":"user","content":` + script + `}]}`, "", nil, chatProto.parseJSON},
		{"chat: no tools", "/v1/chat/completions",
			`{"model":"modelf-flash","messages":[{"role":"user","content":` + script + `}]}`, "", nil, chatProto.parseJSON},
		{"responses: tool_choice none", "/v1/responses",
			`{"model":"modelc-4.7","tool_choice":"none","tools":[{"type":"function","name":"read"}],"input":` + script + `}`, "", nil, responsesProto.parseJSON},
		{"responses: a web_search tool is no function", "/v1/responses",
			`{"model":"modelc-4.7","tools":[{"type":"web_search","name":"read"}],"input":` + script + `}`, "", nil, responsesProto.parseJSON},
		{"messages: tool_choice none", "/v1/messages",
			`{"model":"modela-opus-5-5","max_tokens":99,"tool_choice":{"type":"none"},` + rtTools + `,"messages":[` + msgUser + `]}`, "", nil, messagesProto.parseJSON},
		{"messages: a tool_result turn with text beside it", "/v1/messages",
			`{"model":"modela-opus-5-5","max_tokens":99,"tools":[{"name":"read"},{"name":"write"}],"messages":[` + msgUser +
				`,{"role":"assistant","content":[` + rtToolUse + `]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"},{"type":"text","text":"<reminder>"}]}]}`,
			"Calling write.", []string{"write"}, messagesProto.parseJSON},
		{"gemini: mode NONE", "/v1beta/models/modelf-flash:generateContent",
			`{"toolConfig":{"functionCallingConfig":{"mode":"NONE"}},"tools":[{"functionDeclarations":[{"name":"read"}]}],"contents":[{"parts":[{"text":` + script + `}]}]}`, "", nil, geminiProto.parseJSON},
		{"gemini: ids when the responses have ids", "/v1beta/models/modelf-flash:generateContent",
			`{"tools":[{"function_declarations":[{"name":"read"},{"name":"write"}]}],"contents":[{"parts":[{"text":` + script + `}]},` +
				`{"role":"model","parts":[{"functionCall":{"id":"c1","name":"read","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"read","response":{}}}]}]}`,
			"Calling write.", []string{"write"}, geminiProto.parseJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, http.MethodPost, tc.path, tc.body, anthropicHdr)
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			a := tc.parse(t, b)
			want := tc.text
			if want == "" {
				want = "Simulated reply from"
			}
			if !strings.HasPrefix(a.text, want) || len(a.calls) != len(tc.calls) {
				t.Fatalf("answer %+v, want %q and calls %v", a, want, tc.calls)
			}
			for i, c := range a.calls {
				if c.name != tc.calls[i] || strings.HasPrefix(tc.path, "/v1beta/") && !strings.HasPrefix(c.id, "call_") {
					t.Fatalf("call %d: %+v", i, c)
				}
			}
			if tc.text != "" && a.output != int64(len(strings.Fields(tc.text)))+callTokens(a.calls) {
				t.Fatalf("output %d for %q", a.output, tc.text)
			}
			if tc.text == "" && a.output != ReplyWords { // the script's 6 words echo within ReplyWords
				t.Fatalf("output %d, want the usual reply's words", a.output)
			}
		})
	}
}

func callTokens(calls []lCall) int64 {
	var n int64
	for _, c := range calls {
		n += Tokens(c.args) + Tokens(c.name)
	}
	return n
}

// TestScriptRestartsPerUserTurn: a new user turn with the same script
// starts again at its first call, with ids of its own.
func TestScriptRestartsPerUserTurn(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	first := []lTurn{{role: "user", text: "sim:call read {}"}}
	_, _, b := call(t, ts, http.MethodPost, "/v1/chat/completions", string(chatProto.body(first, false, nil)), nil)
	a1 := chatProto.parseJSON(t, b)
	again := append(first, lTurn{role: "assistant", a: a1}, lTurn{role: "results", res: []lCall{{id: a1.calls[0].id, args: "ok"}}},
		lTurn{role: "assistant", a: lAnswer{text: "done"}}, lTurn{role: "user", text: "sim:call read {}"})
	_, _, b = call(t, ts, http.MethodPost, "/v1/chat/completions", string(chatProto.body(again, false, nil)), nil)
	a2 := chatProto.parseJSON(t, b)
	if len(a1.calls) != 1 || len(a2.calls) != 1 || a1.calls[0].id == a2.calls[0].id {
		t.Fatalf("first %+v, second %+v", a1.calls, a2.calls)
	}
}
