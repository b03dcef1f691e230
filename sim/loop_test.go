package sim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A neutral conversation the four protocol clients below write and read,
// so one loop test drives all four formats.

// lCall is a tool call (id, name, args, Gemini thoughtSignature) or, in
// a results turn, a tool result (id, name, args = its output).
type lCall struct{ id, name, args, sig string }

// lTurn is one message: role "user" (text), "assistant" (an answer sent
// back) or "results" (the tool results).
type lTurn struct {
	role string
	a    lAnswer
	text string
	res  []lCall
}

// lAnswer is one parsed answer, its usage in the endpoint's convention
// (messages reports no reasoning apart).
type lAnswer struct {
	text, think, sig   string // sig: messages signature, responses encrypted_content, Gemini thought part's
	textSig, rsID      string // Gemini text part's signature; responses reasoning item id
	calls              []lCall
	finish             string
	prompt, cached     int64
	output, reasoning  int64
	argPieces, starts  int // streamed argument deltas and call starts seen
	thinkDelta, sigEvt int // streamed thinking deltas and signature deltas (messages)
}

// lProto is one protocol's client.
type lProto struct {
	name, model  string
	path         func(stream bool) string
	hdr          map[string]string
	body         func(conv []lTurn, stream bool, extra map[string]any) []byte
	parseJSON    func(t *testing.T, b []byte) lAnswer
	parseSSE     func(t *testing.T, evs []sseEvent) lAnswer
	usage        func([]byte) (Counts, error)
	think        map[string]any // the request fields asking for low thinking
	idPrefix     string
	callFinish   string
	stopFinish   string
	separateMind bool // reasoning not in output (Gemini)
}

var loopTools = []string{"read", "write", "list"}

// post sends one request of p and parses the answer.
func (p *lProto) post(t *testing.T, ts *httptest.Server, body []byte, stream bool) lAnswer {
	t.Helper()
	if stream {
		evs, err := postStream(t, ts, p.path(true), string(body), p.hdr)
		if err != nil {
			t.Fatalf("%s stream: %v", p.name, err)
		}
		return p.parseSSE(t, evs)
	}
	st, _, b := call(t, ts, http.MethodPost, p.path(false), string(body), p.hdr)
	if st != http.StatusOK {
		t.Fatalf("%s: status %d: %s", p.name, st, b)
	}
	return p.parseJSON(t, b)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func withExtra(m, extra map[string]any) []byte {
	for k, v := range extra {
		m[k] = v
	}
	return mustJSON(m)
}

var chatProto = lProto{
	name: "chat", model: "modele-k3",
	path: func(bool) string { return "/v1/chat/completions" },
	body: func(conv []lTurn, stream bool, extra map[string]any) []byte {
		var msgs []any
		for _, tn := range conv {
			switch tn.role {
			case "user":
				msgs = append(msgs, map[string]any{"role": "user", "content": tn.text})
			case "assistant":
				m := map[string]any{"role": "assistant", "content": tn.a.text}
				if tn.a.think != "" {
					m["reasoning_content"] = tn.a.think
				}
				var calls []any
				for _, c := range tn.a.calls {
					calls = append(calls, map[string]any{"id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": c.args}})
				}
				if calls != nil {
					m["tool_calls"] = calls
				}
				msgs = append(msgs, m)
			case "results":
				for _, r := range tn.res {
					msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": r.id, "content": r.args})
				}
			}
		}
		var tools []any
		for _, n := range loopTools {
			tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": n, "parameters": map[string]any{"type": "object"}}})
		}
		m := map[string]any{"model": "modele-k3", "messages": msgs, "tools": tools}
		if stream {
			m["stream"], m["stream_options"] = true, map[string]any{"include_usage": true}
		}
		return withExtra(m, extra)
	},
	parseJSON: func(t *testing.T, b []byte) lAnswer {
		v := decode[chatAnswer](t, b)
		m := v.Choices[0].Message
		a := lAnswer{text: deref(m.Content), think: deref(m.Reasoning), finish: v.Choices[0].FinishReason}
		for _, c := range m.ToolCalls {
			a.calls = append(a.calls, lCall{id: c.ID, name: c.Function.Name, args: c.Function.Arguments})
		}
		a.setChatUsage(v.Usage)
		return a
	},
	parseSSE:   parseChatSSE,
	usage:      ChatUsage,
	think:      map[string]any{"reasoning_effort": "low"},
	idPrefix:   "call_",
	callFinish: "tool_calls", stopFinish: "stop",
}

type chatAnswer struct {
	Choices []struct {
		Message      chatDelta `json:"message"`
		FinishReason string    `json:"finish_reason"`
	} `json:"choices"`
	Usage chatUsage `json:"usage"`
}

type chatDelta struct {
	Content   *string `json:"content"`
	Reasoning *string `json:"reasoning_content"`
	ToolCalls []struct {
		Index    *int   `json:"index"`
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (a *lAnswer) setChatUsage(u chatUsage) {
	a.prompt, a.cached, a.output = u.PromptTokens, u.PromptTokensDetails.CachedTokens, u.CompletionTokens
	if u.CompletionTokensDetails.ReasoningTokens != nil {
		a.reasoning = *u.CompletionTokensDetails.ReasoningTokens
	}
}

func parseChatSSE(t *testing.T, evs []sseEvent) lAnswer {
	t.Helper()
	var a lAnswer
	var text, think strings.Builder
	for _, ev := range evs {
		if ev.data == "[DONE]" {
			continue
		}
		c := decode[struct {
			Choices []struct {
				Delta        chatDelta `json:"delta"`
				FinishReason *string   `json:"finish_reason"`
			} `json:"choices"`
			Usage *chatUsage `json:"usage"`
		}](t, []byte(ev.data))
		if c.Usage != nil {
			a.setChatUsage(*c.Usage)
		}
		if len(c.Choices) == 0 {
			continue
		}
		d := c.Choices[0].Delta
		text.WriteString(deref(d.Content))
		think.WriteString(deref(d.Reasoning))
		if c.Choices[0].FinishReason != nil {
			a.finish = *c.Choices[0].FinishReason
		}
		for _, tc := range d.ToolCalls {
			i := *tc.Index
			if tc.ID != "" {
				if i != len(a.calls) || tc.Function.Name == "" {
					t.Fatalf("tool call start %d out of order or without a name: %s", i, ev.data)
				}
				a.calls = append(a.calls, lCall{id: tc.ID, name: tc.Function.Name})
				a.starts++
				continue
			}
			a.calls[i].args += tc.Function.Arguments
			a.argPieces++
		}
	}
	a.text, a.think = text.String(), think.String()
	return a
}

var messagesProto = lProto{
	name: "messages", model: "modela-fable-5-1",
	path: func(bool) string { return "/v1/messages" },
	hdr:  anthropicHdr,
	body: func(conv []lTurn, stream bool, extra map[string]any) []byte {
		var msgs []any
		for _, tn := range conv {
			switch tn.role {
			case "user":
				msgs = append(msgs, map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": tn.text}}})
			case "assistant":
				var blocks []any
				if tn.a.sig != "" {
					blocks = append(blocks, map[string]any{"type": "thinking", "thinking": tn.a.think, "signature": tn.a.sig})
				}
				blocks = append(blocks, map[string]any{"type": "text", "text": tn.a.text})
				for _, c := range tn.a.calls {
					blocks = append(blocks, map[string]any{"type": "tool_use", "id": c.id, "name": c.name, "input": json.RawMessage(c.args)})
				}
				msgs = append(msgs, map[string]any{"role": "assistant", "content": blocks})
			case "results":
				var blocks []any
				for _, r := range tn.res {
					blocks = append(blocks, map[string]any{"type": "tool_result", "tool_use_id": r.id, "content": r.args})
				}
				msgs = append(msgs, map[string]any{"role": "user", "content": blocks})
			}
		}
		var tools []any
		for _, n := range loopTools {
			tools = append(tools, map[string]any{"name": n, "input_schema": map[string]any{"type": "object"}})
		}
		return withExtra(map[string]any{"model": "modela-fable-5-1", "max_tokens": 4096, "messages": msgs, "tools": tools, "stream": stream}, extra)
	},
	parseJSON: func(t *testing.T, b []byte) lAnswer {
		m := decode[struct {
			Content    []msgBlock `json:"content"`
			StopReason string     `json:"stop_reason"`
			Usage      anthUsage  `json:"usage"`
		}](t, b)
		a := lAnswer{finish: m.StopReason, prompt: m.Usage.InputTokens, cached: m.Usage.CacheReadInputTokens, output: m.Usage.OutputTokens}
		for _, bl := range m.Content {
			a.addBlock(t, bl)
		}
		return a
	},
	parseSSE:   parseMessagesSSE,
	usage:      MessagesUsage,
	think:      map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": 2048}},
	idPrefix:   "toolu_",
	callFinish: "tool_use", stopFinish: "end_turn",
}

type msgBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

func (a *lAnswer) addBlock(t *testing.T, bl msgBlock) {
	t.Helper()
	switch bl.Type {
	case "thinking":
		a.think, a.sig = bl.Thinking, bl.Signature
	case "text":
		a.text = bl.Text
	case "tool_use":
		a.calls = append(a.calls, lCall{id: bl.ID, name: bl.Name, args: string(bl.Input)})
	default:
		t.Fatalf("block type %q", bl.Type)
	}
}

func parseMessagesSSE(t *testing.T, evs []sseEvent) lAnswer {
	t.Helper()
	var a lAnswer
	var cur msgBlock
	var buf strings.Builder
	for _, ev := range evs {
		e := decode[struct {
			Message *struct {
				Usage anthUsage `json:"usage"`
			} `json:"message"`
			ContentBlock msgBlock `json:"content_block"`
			Delta        struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				Thinking    string `json:"thinking"`
				Signature   string `json:"signature"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
			Usage *anthUsage `json:"usage"`
		}](t, []byte(ev.data))
		switch ev.name {
		case "message_start":
			a.prompt, a.cached = e.Message.Usage.InputTokens, e.Message.Usage.CacheReadInputTokens
		case "content_block_start":
			cur = e.ContentBlock
			buf.Reset()
			if cur.Type == "tool_use" {
				a.starts++
			}
		case "content_block_delta":
			switch e.Delta.Type {
			case "text_delta":
				buf.WriteString(e.Delta.Text)
			case "thinking_delta":
				buf.WriteString(e.Delta.Thinking)
				a.thinkDelta++
			case "signature_delta":
				cur.Signature = e.Delta.Signature
				a.sigEvt++
			case "input_json_delta":
				buf.WriteString(e.Delta.PartialJSON)
				a.argPieces++
			}
		case "content_block_stop":
			cur.Text, cur.Thinking = buf.String(), buf.String()
			if cur.Type == "tool_use" {
				cur.Input = json.RawMessage(buf.String())
			}
			a.addBlock(t, cur)
		case "message_delta":
			a.finish, a.output = e.Delta.StopReason, e.Usage.OutputTokens
		}
	}
	return a
}
