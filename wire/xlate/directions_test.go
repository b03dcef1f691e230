package xlate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The golden tests of every direction the gateway translates in: a
// caller's request (testdata/directions/request.<caller>.json) built for
// the upstream, the upstream's JSON answer (answer.<upstream>.json) and
// event stream (stream.<upstream>.sse) translated back into the caller's
// shape. The fixtures follow the providers' documented examples; the
// goldens (<caller>-<upstream>.request.json, .answer.json, .stream.sse)
// were each read by eye against the providers' docs and are the spec.
// XLATE_DIR_UPDATE=1 rewrites them.
//
// The usage a caller sees is also checked against numbers worked out by
// hand (dirWantUsage), in the caller's convention: chat and responses
// count cache reads and writes inside the prompt, messages outside.

// dirDirections are the (caller, upstream) pairs the gateway translates.
var dirDirections = []struct{ caller, upstream Shape }{
	{Chat, Messages}, {Chat, Gemini},
	{Responses, Chat}, {Responses, Messages}, {Responses, Gemini},
	{Messages, Chat}, {Messages, Gemini},
}

// dirUpstreamUsage is each upstream fixture's usage, as its docs define
// it:
//
//   - messages: input_tokens 472 (outside the cache), cache writes 1500
//     (1000 for 5 minutes, 500 for an hour), cache reads 3000, output 156
//     (Anthropic reports no separate thinking count);
//   - gemini: promptTokenCount 4972 of which cachedContentTokenCount 3000,
//     candidatesTokenCount 36 and thoughtsTokenCount 106 (thoughts are
//     billed as output, outside candidates);
//   - chat: prompt_tokens 4972 of which cached_tokens 3000,
//     completion_tokens 142 of which reasoning_tokens 106.
//
// In the neutral (Anthropic) convention each is {uncached input, cache
// read, cache write, output, reasoning}:
var dirUpstreamUsage = map[Shape][5]int64{
	Messages: {472, 3000, 1500, 156, 0},
	Gemini:   {4972 - 3000, 3000, 0, 36 + 106, 106},
	Chat:     {4972 - 3000, 3000, 0, 142, 106},
}

// dirWantUsage is the usage a caller of shape caller must see for the
// upstream's, by field path, computed from dirUpstreamUsage by each
// caller's documented convention.
func dirWantUsage(caller, upstream Shape) map[string]int64 {
	u := dirUpstreamUsage[upstream]
	in, read, write, out, reasoning := u[0], u[1], u[2], u[3], u[4]
	prompt := in + read + write // OpenAI: every input token, cached or not
	switch caller {
	case Chat:
		return map[string]int64{
			"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out,
			"prompt_tokens_details.cached_tokens":        read,
			"completion_tokens_details.reasoning_tokens": reasoning,
		}
	case Responses:
		return map[string]int64{
			"input_tokens": prompt, "output_tokens": out, "total_tokens": prompt + out,
			"input_tokens_details.cached_tokens":     read,
			"output_tokens_details.reasoning_tokens": reasoning,
		}
	default: // Anthropic: input_tokens is what was neither read nor written
		return map[string]int64{
			"input_tokens": in, "cache_read_input_tokens": read,
			"cache_creation_input_tokens": write, "output_tokens": out,
		}
	}
}

// TestDirDirectionsUsageByHand pins the hand-worked numbers themselves,
// so that a slip in dirWantUsage cannot agree with one in a codec.
func TestDirDirectionsUsageByHand(t *testing.T) {
	for _, c := range []struct {
		caller, upstream Shape
		field            string
		want             int64
	}{
		{Chat, Messages, "prompt_tokens", 4972},
		{Chat, Messages, "total_tokens", 5128},
		{Chat, Gemini, "completion_tokens", 142},
		{Responses, Messages, "input_tokens_details.cached_tokens", 3000},
		{Responses, Gemini, "total_tokens", 5114},
		{Messages, Gemini, "input_tokens", 1972},
		{Messages, Chat, "cache_creation_input_tokens", 0},
	} {
		if got := dirWantUsage(c.caller, c.upstream)[c.field]; got != c.want {
			t.Errorf("%s←%s %s = %d, want %d", c.caller, c.upstream, c.field, got, c.want)
		}
	}
}

func TestDirDirections(t *testing.T) {
	for _, d := range dirDirections {
		t.Run(string(d.caller)+"-"+string(d.upstream), func(t *testing.T) {
			name := string(d.caller) + "-" + string(d.upstream)
			r, err := ParseRequest(d.caller, dirRead(t, "request."+string(d.caller)+".json"))
			if err != nil {
				t.Fatalf("parse the caller's request: %v", err)
			}
			t.Run("request", func(t *testing.T) {
				body, err := BuildRequest(d.upstream, r)
				if err != nil {
					t.Fatalf("build: %v", err)
				}
				if !json.Valid(body) {
					t.Fatalf("built request is not JSON: %s", body)
				}
				if c := codecs[d.upstream]; c.parseRequest != nil {
					if _, err := c.parseRequest(body); err != nil {
						t.Fatalf("the %s request built does not parse back: %v\n%s", d.upstream, err, body)
					}
				}
				dirGolden(t, name+".request.json", dirIndent(t, body))
			})
			t.Run("answer", func(t *testing.T) {
				respDeterministic(t)
				start := time.Now().Unix()
				out, err := TranslateAnswer(d.upstream, d.caller, dirRead(t, "answer."+string(d.upstream)+".json"), r)
				if err != nil {
					t.Fatalf("translate: %v", err)
				}
				out = dirNormal(t, out, start)
				var v struct {
					Usage map[string]any `json:"usage"`
				}
				if err := json.Unmarshal(out, &v); err != nil {
					t.Fatalf("answer: %v\n%s", err, out)
				}
				dirCheckUsage(t, v.Usage, dirWantUsage(d.caller, d.upstream))
				dirGolden(t, name+".answer.json", dirIndent(t, out))
			})
			t.Run("stream", func(t *testing.T) {
				respDeterministic(t)
				start := time.Now().Unix()
				out := dirRunStream(t, d.upstream, d.caller, r, dirRead(t, "stream."+string(d.upstream)+".sse"))
				out = dirNormal(t, out, start)
				dirCheckUsage(t, dirStreamUsage(t, d.caller, out), dirWantUsage(d.caller, d.upstream))
				dirGolden(t, name+".stream.sse", out)
			})
		})
	}
}

// dirRunStream translates an upstream SSE body event by event: the
// caller's whole stream, every event of which must be JSON.
func dirRunStream(t *testing.T, from, to Shape, r *Request, sse []byte) []byte {
	t.Helper()
	s, err := NewStream(from, to, r)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, ev := range dirSplitSSE(sse) {
		b, err := s.Event(ev.name, ev.data)
		if err != nil {
			t.Fatalf("event %s %s: %v", ev.name, ev.data, err)
		}
		out = append(out, b...)
	}
	b, err := s.End()
	if err != nil {
		t.Fatalf("end: %v", err)
	}
	out = append(out, b...)
	for _, ev := range dirSplitSSE(out) {
		if string(ev.data) != "[DONE]" && !json.Valid(ev.data) {
			t.Fatalf("caller event %q is not JSON: %s", ev.name, ev.data)
		}
	}
	return out
}

type dirEvent struct {
	name string
	data []byte
}

// dirSplitSSE splits an SSE body into its events: name and data (data
// lines joined by newlines).
func dirSplitSSE(b []byte) []dirEvent {
	var evs []dirEvent
	for _, block := range strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n\n") {
		var ev dirEvent
		var datas []string
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event:"):
				ev.name = strings.TrimSpace(line[len("event:"):])
			case strings.HasPrefix(line, "data:"):
				datas = append(datas, strings.TrimPrefix(line[len("data:"):], " "))
			}
		}
		if ev.name == "" && datas == nil {
			continue
		}
		ev.data = []byte(strings.Join(datas, "\n"))
		evs = append(evs, ev)
	}
	return evs
}

// dirStreamUsage is the usage a caller's SDK reads off its stream: chat's
// usage chunk, responses' response.completed, messages' message_start
// usage updated by message_delta's.
func dirStreamUsage(t *testing.T, caller Shape, sse []byte) map[string]any {
	t.Helper()
	var usage map[string]any
	for _, ev := range dirSplitSSE(sse) {
		if string(ev.data) == "[DONE]" {
			continue
		}
		var v struct {
			Type     string         `json:"type"`
			Usage    map[string]any `json:"usage"`
			Message  struct{ Usage map[string]any }
			Response struct{ Usage map[string]any }
		}
		if err := json.Unmarshal(ev.data, &v); err != nil {
			t.Fatalf("%s: %v", ev.data, err)
		}
		switch {
		case caller == Chat && v.Usage != nil:
			if usage != nil {
				t.Fatalf("two usage chunks")
			}
			usage = v.Usage
		case caller == Responses && v.Type == "response.completed":
			usage = v.Response.Usage
		case caller == Messages && v.Type == "message_start":
			usage = v.Message.Usage
		case caller == Messages && v.Type == "message_delta":
			for k, x := range v.Usage {
				usage[k] = x
			}
		}
	}
	if usage == nil {
		t.Fatalf("the %s stream carries no usage", caller)
	}
	return usage
}

// dirCheckUsage compares each field of want (a dotted path) with usage.
func dirCheckUsage(t *testing.T, usage map[string]any, want map[string]int64) {
	t.Helper()
	for path, n := range want {
		var v any = usage
		for _, k := range strings.Split(path, ".") {
			m, _ := v.(map[string]any)
			v = m[k]
		}
		f, ok := v.(float64)
		if !ok || int64(f) != n {
			t.Errorf("usage.%s = %v, want %d (usage %v)", path, v, n, usage)
		}
	}
}

var dirCreated = regexp.MustCompile(`"created":([0-9]+)`)

// dirNormal replaces the created time a chat caller's answer gets when the
// upstream gave none (the time of translation) by 0, after checking it is
// that time.
func dirNormal(t *testing.T, out []byte, start int64) []byte {
	t.Helper()
	return dirCreated.ReplaceAllFunc(out, func(m []byte) []byte {
		n, _ := strconv.ParseInt(string(dirCreated.FindSubmatch(m)[1]), 10, 64)
		if n < start || n > time.Now().Unix() {
			t.Errorf("created %d is not the time of translation", n)
		}
		return []byte(`"created":0`)
	})
}

func dirRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "directions", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dirIndent is JSON indented for a golden a reader can follow.
func dirIndent(t *testing.T, js []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, js, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, js)
	}
	return append(b.Bytes(), '\n')
}

// dirGolden compares got with testdata/directions/name, rewritten when
// XLATE_DIR_UPDATE=1.
func dirGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "directions", name)
	if os.Getenv("XLATE_DIR_UPDATE") == "1" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\ngot\n%s\nwant\n%s", name, got, want)
	}
}

// TestDirStreamAgreesWithAnswer: each upstream's stream fixture says what
// its answer fixture says (the same ids, thinking and its signatures,
// text, tool call and usage), so a caller must read the same from the
// translated stream as from the translated answer: its SDK's accumulation
// of the stream (dirStreamSummary) equals the answer (dirAnswerSummary).
// Among what this catches: a Gemini function call's thoughtSignature,
// which a chat caller must send back, lost from the chat stream.
func TestDirStreamAgreesWithAnswer(t *testing.T) {
	for _, d := range dirDirections {
		t.Run(string(d.caller)+"-"+string(d.upstream), func(t *testing.T) {
			respDeterministic(t)
			r, err := ParseRequest(d.caller, dirRead(t, "request."+string(d.caller)+".json"))
			if err != nil {
				t.Fatal(err)
			}
			answer, err := TranslateAnswer(d.upstream, d.caller, dirRead(t, "answer."+string(d.upstream)+".json"), r)
			if err != nil {
				t.Fatal(err)
			}
			stream := dirRunStream(t, d.upstream, d.caller, r, dirRead(t, "stream."+string(d.upstream)+".sse"))
			got, want := dirStreamSummary(t, d.caller, stream), dirAnswerSummary(t, d.caller, answer)
			if g, w := dirJSON(t, got), dirJSON(t, want); g != w {
				t.Errorf("the stream reads\n%s\nthe answer\n%s", g, w)
			}
		})
	}
}

// dirSummary is what a caller reads from an answer: the fields an SDK
// gives it, the tool calls' arguments parsed.
type dirSummary map[string]any

func dirJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dirArgs is a tool call's arguments parsed, so that spacing differences
// between a stream's pieces and an answer's object do not count.
func dirArgs(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("tool call arguments %q: %v", s, err)
	}
	return v
}

// dirAnswerSummary reads a caller's JSON answer.
func dirAnswerSummary(t *testing.T, caller Shape, answer []byte) dirSummary {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(answer, &v); err != nil {
		t.Fatal(err)
	}
	switch caller {
	case Chat:
		ch := v["choices"].([]any)[0].(map[string]any)
		msg := ch["message"].(map[string]any)
		var sigs []any
		if ds, ok := msg["reasoning_details"].([]any); ok {
			for _, d := range ds {
				sigs = append(sigs, d.(map[string]any)["signature"])
			}
		}
		var calls []any
		tcs, _ := msg["tool_calls"].([]any)
		for _, tc := range tcs {
			m := tc.(map[string]any)
			f := m["function"].(map[string]any)
			calls = append(calls, []any{m["id"], f["name"], dirArgs(t, f["arguments"].(string)), m["extra_content"]})
		}
		return dirSummary{"id": v["id"], "model": v["model"], "content": msg["content"], "reasoning": msg["reasoning_content"],
			"signatures": sigs, "calls": calls, "finish": ch["finish_reason"], "usage": v["usage"]}
	case Messages:
		blocks := v["content"].([]any)
		for _, b := range blocks {
			if m := b.(map[string]any); m["type"] == "tool_use" {
				m["input"] = dirArgs(t, dirJSON(t, m["input"]))
			}
		}
		delete(v, "content")
		v["blocks"] = blocks
		return v
	default:
		// created_at is the upstream's in an answer that has it (chat's
		// created), the time of translation in a stream, whose events
		// carry no time; item ids are made by the gateway, one per item
		// written.
		delete(v, "created_at")
		for _, it := range v["output"].([]any) {
			m := it.(map[string]any)
			delete(m, "id")
			if m["type"] == "function_call" {
				m["arguments"] = dirArgs(t, m["arguments"].(string))
			}
		}
		return v
	}
}

// dirStreamSummary reads a caller's stream as its SDK accumulates it.
func dirStreamSummary(t *testing.T, caller Shape, sse []byte) dirSummary {
	t.Helper()
	switch caller {
	case Chat:
		return dirChatStreamSummary(t, sse)
	case Messages:
		return dirMsgStreamSummary(t, sse)
	}
	var done map[string]any
	for _, ev := range dirSplitSSE(sse) {
		var v struct {
			Type     string         `json:"type"`
			Response map[string]any `json:"response"`
		}
		if err := json.Unmarshal(ev.data, &v); err != nil {
			t.Fatal(err)
		}
		if v.Type == "response.completed" {
			done = v.Response
		}
	}
	if done == nil {
		t.Fatal("no response.completed")
	}
	b, _ := json.Marshal(done)
	return dirAnswerSummary(t, Responses, b)
}

// dirChatStreamSummary accumulates chunks as the OpenAI SDKs do: content
// and reasoning_content appended, reasoning_details and tool calls merged
// by index (arguments appended), the last finish_reason and usage.
func dirChatStreamSummary(t *testing.T, sse []byte) dirSummary {
	t.Helper()
	type call struct {
		id, name, args string
		extra          any
	}
	var (
		id, model, finish  any
		usage              any
		content, reasoning *string
		sigs               []any
		calls              []*call
	)
	appendTo := func(dst **string, s string) {
		if *dst == nil {
			*dst = new(string)
		}
		**dst += s
	}
	for _, ev := range dirSplitSSE(sse) {
		if string(ev.data) == "[DONE]" {
			continue
		}
		var ch struct {
			ID      string `json:"id"`
			Model   string `json:"model"`
			Choices []struct {
				Delta struct {
					Content          *string `json:"content"`
					ReasoningContent *string `json:"reasoning_content"`
					ReasoningDetails []struct {
						Index     int    `json:"index"`
						Signature string `json:"signature"`
					} `json:"reasoning_details"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
						ExtraContent any `json:"extra_content"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage any `json:"usage"`
		}
		if err := json.Unmarshal(ev.data, &ch); err != nil {
			t.Fatal(err)
		}
		id, model = ch.ID, ch.Model
		if ch.Usage != nil {
			usage = ch.Usage
		}
		for _, c := range ch.Choices {
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
			if d := c.Delta.Content; d != nil && *d != "" {
				appendTo(&content, *d)
			}
			if d := c.Delta.ReasoningContent; d != nil {
				appendTo(&reasoning, *d)
			}
			for _, rd := range c.Delta.ReasoningDetails {
				for len(sigs) <= rd.Index {
					sigs = append(sigs, nil)
				}
				if rd.Signature != "" {
					sigs[rd.Index] = rd.Signature
				}
			}
			for _, tc := range c.Delta.ToolCalls {
				for len(calls) <= tc.Index {
					calls = append(calls, &call{})
				}
				k := calls[tc.Index]
				k.id += tc.ID
				k.name += tc.Function.Name
				k.args += tc.Function.Arguments
				if tc.ExtraContent != nil {
					k.extra = tc.ExtraContent
				}
			}
		}
	}
	var cs []any
	for _, c := range calls {
		cs = append(cs, []any{c.id, c.name, dirArgs(t, c.args), c.extra})
	}
	s := dirSummary{"id": id, "model": model, "content": content, "reasoning": reasoning, "signatures": sigs, "calls": cs, "finish": finish, "usage": usage}
	return dirSummary(dirRoundTrip(t, s))
}

// dirMsgStreamSummary accumulates a Messages stream as Anthropic's SDKs
// do: the message of message_start, each block from its start and deltas,
// message_delta's stop reason and usage.
func dirMsgStreamSummary(t *testing.T, sse []byte) dirSummary {
	t.Helper()
	var msg map[string]any
	var blocks []map[string]any
	partial := map[int]string{}
	for _, ev := range dirSplitSSE(sse) {
		var v struct {
			Type         string         `json:"type"`
			Index        int            `json:"index"`
			Message      map[string]any `json:"message"`
			ContentBlock map[string]any `json:"content_block"`
			Delta        map[string]any `json:"delta"`
			Usage        map[string]any `json:"usage"`
		}
		if err := json.Unmarshal(ev.data, &v); err != nil {
			t.Fatal(err)
		}
		switch v.Type {
		case "message_start":
			msg = v.Message
		case "content_block_start":
			if v.Index != len(blocks) {
				t.Fatalf("block %d starts after %d blocks", v.Index, len(blocks))
			}
			blocks = append(blocks, v.ContentBlock)
		case "content_block_delta":
			b := blocks[v.Index]
			switch v.Delta["type"] {
			case "text_delta":
				b["text"] = b["text"].(string) + v.Delta["text"].(string)
			case "thinking_delta":
				b["thinking"] = b["thinking"].(string) + v.Delta["thinking"].(string)
			case "signature_delta":
				b["signature"] = v.Delta["signature"]
			case "input_json_delta":
				partial[v.Index] += v.Delta["partial_json"].(string)
			}
		case "content_block_stop":
			if b := blocks[v.Index]; b["type"] == "tool_use" {
				b["input"] = dirArgs(t, partial[v.Index])
			}
		case "message_delta":
			for k, x := range v.Delta {
				msg[k] = x
			}
			for k, x := range v.Usage {
				msg["usage"].(map[string]any)[k] = x
			}
		}
	}
	delete(msg, "content")
	msg["blocks"] = blocks
	return dirSummary(dirRoundTrip(t, msg))
}

// dirRoundTrip is v through JSON, so that it compares with a summary read
// from JSON.
func dirRoundTrip(t *testing.T, v any) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(dirJSON(t, v)), &m); err != nil {
		t.Fatal(err)
	}
	return m
}
