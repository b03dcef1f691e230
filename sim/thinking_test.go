package sim

import (
	"net/http"
	"strings"
	"testing"
)

// TestThinkingLevels checks what asks for thinking in each protocol and
// how many reasoning words it gets, in the usage and the answer.
func TestThinkingLevels(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	const user = `"hi"`
	msg := func(thinking string) string {
		return `{"model":"modela-sonnet-5-5","max_tokens":64000,` + thinking + `"messages":[{"role":"user","content":` + user + `}]}`
	}
	chat := func(effort string) string {
		return `{"model":"modelf-flash",` + effort + `"messages":[{"role":"user","content":` + user + `}]}`
	}
	resp := func(reasoning string) string { return `{"model":"modelc-4.7",` + reasoning + `"input":` + user + `}` }
	gem := func(cfg string) string {
		return `{"generationConfig":{"thinkingConfig":` + cfg + `},"contents":[{"parts":[{"text":` + user + `}]}]}`
	}
	cases := []struct {
		name, path, body string
		words            int64
	}{
		{"chat none", "/v1/chat/completions", chat(``), 0},
		{"chat minimal is off", "/v1/chat/completions", chat(`"reasoning_effort":"minimal",`), 0},
		{"chat low", "/v1/chat/completions", chat(`"reasoning_effort":"low",`), ThinkingLow},
		{"chat high", "/v1/chat/completions", chat(`"reasoning_effort":"high",`), ThinkingHigh},
		{"chat xhigh", "/v1/chat/completions", chat(`"reasoning_effort":"xhigh",`), ThinkingMax},
		{"responses summary only", "/v1/responses", resp(`"reasoning":{"summary":"auto"},`), 0},
		{"responses medium", "/v1/responses", resp(`"reasoning":{"effort":"medium"},`), ThinkingMedium},
		{"responses an effort not known", "/v1/responses", resp(`"reasoning":{"effort":"ultra"},`), ThinkingMedium},
		{"messages budget 1024", "/v1/messages", msg(`"thinking":{"type":"enabled","budget_tokens":1024},`), ThinkingLow},
		{"messages budget 8192", "/v1/messages", msg(`"thinking":{"type":"enabled","budget_tokens":8192},`), ThinkingMedium},
		{"messages budget 31999", "/v1/messages", msg(`"thinking":{"type":"enabled","budget_tokens":31999},`), ThinkingHigh},
		{"messages adaptive", "/v1/messages", msg(`"thinking":{"type":"adaptive"},`), ThinkingHigh},
		{"messages adaptive, effort low", "/v1/messages", msg(`"thinking":{"type":"adaptive"},"output_config":{"effort":"low"},`), ThinkingLow},
		{"messages adaptive, effort max", "/v1/messages", msg(`"thinking":{"type":"adaptive"},"output_config":{"effort":"max"},`), ThinkingMax},
		{"messages disabled", "/v1/messages", msg(`"thinking":{"type":"disabled"},`), 0},
		{"gemini includeThoughts", "/v1beta/models/modelf-flash:generateContent", gem(`{"includeThoughts":true}`), ThinkingMedium},
		{"gemini level low", "/v1beta/models/modelf-flash:generateContent", gem(`{"includeThoughts":true,"thinkingLevel":"LOW"}`), ThinkingLow},
		{"gemini budget, not shown", "/v1beta/models/modelf-flash:generateContent", gem(`{"thinkingBudget":20000}`), ThinkingHigh},
		{"gemini budget 0 is off", "/v1beta/models/modelf-flash:generateContent", gem(`{"thinkingBudget":0,"includeThoughts":true}`), 0},
		{"gemini dynamic budget alone is off", "/v1beta/models/modelf-flash:generateContent", gem(`{"thinkingBudget":-1}`), 0},
		{"gemini snake_case", "/v1beta/models/modelf-flash:generateContent",
			`{"generation_config":{"thinking_config":{"thinking_budget":4000,"include_thoughts":true}},"contents":[{"parts":[{"text":"hi"}]}]}`, ThinkingMedium},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, http.MethodPost, tc.path, tc.body, anthropicHdr)
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			var a lAnswer
			var c Counts
			var err error
			switch {
			case strings.HasPrefix(tc.path, "/v1beta/"):
				a = geminiProto.parseJSON(t, b)
				c, err = GeminiUsage([]byte(tc.body))
			case tc.path == "/v1/messages":
				a = messagesProto.parseJSON(t, b)
				c, err = MessagesUsage([]byte(tc.body))
			case tc.path == "/v1/responses":
				a = responsesProto.parseJSON(t, b)
				c, err = ResponsesUsage([]byte(tc.body))
			default:
				a = chatProto.parseJSON(t, b)
				c, err = ChatUsage([]byte(tc.body))
			}
			if err != nil || c.Reasoning != tc.words || c.Completion != a.output {
				t.Fatalf("helper %+v %v, answer %+v", c, err, a)
			}
			text := ReplyWords
			if !strings.HasPrefix(tc.path, "/v1beta/") {
				text += int(tc.words) // the reasoning is part of the output
			}
			if a.output != int64(text) || tc.path != "/v1/messages" && a.reasoning != tc.words {
				t.Fatalf("output %d reasoning %d, want %d and %d", a.output, a.reasoning, text, tc.words)
			}
			shown := tc.name != "gemini budget, not shown"
			if want := ThinkingText(int(tc.words)); shown && a.think != want || !shown && a.think != "" {
				t.Fatalf("thinking %q, want %q", a.think, want)
			}
			if !shown && a.textSig != Signature("modelf-flash", ThinkingText(int(tc.words))) {
				t.Fatalf("without a thought part the text part carries the signature: %q", a.textSig)
			}
		})
	}
}

func TestThinkingText(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 3, 4, ThinkingLow, ThinkingMax} {
		got := ThinkingText(n)
		if len(strings.Fields(got)) != n || n >= 3 && !strings.HasPrefix(got, "Considering the request.") {
			t.Errorf("ThinkingText(%d) = %q", n, got)
		}
	}
	if s := Signature("m", "x"); !strings.HasPrefix(s, "simsig_") || len(s) != 7+16 || s == Signature("m", "y") || s == Signature("n", "x") {
		t.Errorf("Signature %q does not bind the model and the text", s)
	}
}

// TestThinkingCap: the max tokens field caps the reasoning and the reply
// together, as upstream counts thinking against it.
func TestThinkingCap(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	cases := []struct {
		name, path, body string
		think, text      int64
		finish           string
		parse            func(*testing.T, []byte) lAnswer
	}{
		{"messages: reply gets the rest", "/v1/messages", `{"model":"modela-opus-5-5","max_tokens":20,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`,
			ThinkingLow, 12, "max_tokens", messagesProto.parseJSON},
		{"chat: reasoning alone fills it", "/v1/chat/completions", `{"model":"modelf-flash","max_completion_tokens":5,"reasoning_effort":"low","messages":[{"role":"user","content":"hi"}]}`,
			5, 0, "length", chatProto.parseJSON},
		{"responses: exactly the reasoning", "/v1/responses", `{"model":"modelc-4.7","max_output_tokens":8,"reasoning":{"effort":"low"},"input":"hi"}`,
			8, 0, "incomplete", responsesProto.parseJSON},
		{"gemini: thoughts count", "/v1beta/models/modelf-flash:generateContent", `{"generationConfig":{"maxOutputTokens":10,"thinkingConfig":{"includeThoughts":true,"thinkingBudget":2048}},"contents":[{"parts":[{"text":"hi"}]}]}`,
			ThinkingLow, 2, "MAX_TOKENS", geminiProto.parseJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, http.MethodPost, tc.path, tc.body, anthropicHdr)
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			a := tc.parse(t, b)
			if int64(len(strings.Fields(a.think))) != tc.think || int64(len(strings.Fields(a.text))) != tc.text || a.finish != tc.finish {
				t.Fatalf("answer %+v", a)
			}
			want := tc.think + tc.text
			if strings.HasPrefix(tc.path, "/v1beta/") {
				want = tc.text
			}
			if a.output != want {
				t.Fatalf("output %d, want %d", a.output, want)
			}
		})
	}
}

// TestThinkingShapes checks the per-protocol details: messages display
// "omitted" and its stream, responses encrypted_content only when
// included, the chat stream's reasoning chunk.
func TestThinkingShapes(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{Chunks: 2})
	omitted := `{"model":"modela-opus-5-5","max_tokens":100,"thinking":{"type":"enabled","budget_tokens":2048,"display":"omitted"},"messages":[{"role":"user","content":"hi"}]`
	_, _, b := call(t, ts, http.MethodPost, "/v1/messages", omitted+`}`, anthropicHdr)
	if a := messagesProto.parseJSON(t, b); a.think != "" || a.sig != Signature("modela-opus-5-5", "") || a.output != ReplyWords+ThinkingLow {
		t.Fatalf("omitted thinking: %+v", a)
	}
	evs, err := postStream(t, ts, "/v1/messages", omitted+`,"stream":true}`, anthropicHdr)
	if a := parseMessagesSSE(t, evs); err != nil || a.thinkDelta != 0 || a.sigEvt != 1 || a.sig != Signature("modela-opus-5-5", "") {
		t.Fatalf("omitted thinking streamed: %+v %v", a, err)
	}
	_, _, b = call(t, ts, http.MethodPost, "/v1/responses", `{"model":"modelc-4.7","reasoning":{"effort":"low"},"input":"hi"}`, nil)
	if a := responsesProto.parseJSON(t, b); a.think == "" || a.sig != "" || strings.Contains(string(b), "encrypted_content") {
		t.Fatalf("encrypted_content without include: %s", b)
	}
	evs, err = postStream(t, ts, "/v1/chat/completions", `{"model":"modelf-flash","stream":true,"reasoning_effort":"low","messages":[{"role":"user","content":"hi"}]}`, nil)
	if err != nil || len(evs) != 1+1+2+1+1 || !strings.Contains(evs[1].data, `"delta":{"reasoning_content":"Considering the request.`) {
		t.Fatalf("chat stream: %v %+v", err, evs)
	}
}
