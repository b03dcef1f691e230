package xlate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Fuzz targets across formats: translation never panics, whatever the
// pair of shapes and the body; a request translated for a target is JSON
// the target's own reader takes; and a request through chat and messages
// keeps every text and tool call.

// xfShapes are the shapes in a fixed order, for fuzzed selectors.
var xfShapes = []Shape{Chat, Responses, Messages, Gemini}

// xfSeeds adds every fixture of testdata (requests, answers, streams) as
// a body, for every pair of shapes.
func xfSeeds(f *testing.F) {
	for _, glob := range []string{"*/*.json", "*/*.sse"} {
		files, _ := filepath.Glob(filepath.Join("testdata", glob))
		for _, name := range files {
			b, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			for a := range len(xfShapes) {
				for to := range len(xfShapes) {
					f.Add(uint8(a), uint8(to), b)
				}
			}
		}
	}
	f.Add(uint8(2), uint8(3), []byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}],"is_error":true}]}]}`))
	f.Add(uint8(1), uint8(2), []byte(`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"not json"}]}`))
	f.Add(uint8(0), uint8(1), []byte(`{"model":"m","messages":[{"role":"tool","tool_call_id":"c","content":""}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":"required"}`))
}

// xfAllowedBuildError: what BuildRequest may refuse a request its reader
// took: a feature the target cannot express, or a field it cannot write.
func xfAllowedBuildError(err error) bool {
	var un *Unsupported
	var inv *Invalid
	return errors.As(err, &un) || errors.As(err, &inv)
}

// FuzzTranslateAnyPair: a body read as a request of any caller's shape
// and built for any upstream's never panics, and what is built is valid
// JSON that the target's own reader (chat, messages; Gemini has none)
// takes; the same body read as an answer or a stream of any upstream's
// shape for any caller's never panics, and a translated answer is JSON.
func FuzzTranslateAnyPair(f *testing.F) {
	xfSeeds(f)
	f.Fuzz(func(t *testing.T, a, b uint8, body []byte) {
		from, to := xfShapes[int(a)%len(xfShapes)], xfShapes[int(b)%len(xfShapes)]
		xfRequest(t, from, to, body)
		xfAnswer(t, from, to, body)
		xfStream(t, from, to, body)
	})
}

func xfRequest(t *testing.T, from, to Shape, body []byte) {
	if codecs[from].parseRequest == nil || codecs[to].buildRequest == nil {
		return
	}
	r, err := ParseRequest(from, body)
	if err != nil {
		if !xfAllowedBuildError(err) {
			t.Fatalf("%s request refused with %T %v", from, err, err)
		}
		return
	}
	built, err := BuildRequest(to, r)
	if err != nil {
		if !xfAllowedBuildError(err) {
			t.Fatalf("%s→%s: build refused with %T %v", from, to, err, err)
		}
		return
	}
	if !json.Valid(built) {
		t.Fatalf("%s→%s: built request is not JSON: %s", from, to, built)
	}
	if codecs[to].parseRequest == nil {
		return
	}
	if _, err := ParseRequest(to, built); err != nil && !xfEmptyConversation(to, r, err) {
		t.Fatalf("%s→%s: the built request does not read back: %v\n%s", from, to, err, built)
	}
}

// xfEmptyConversation: a request with no turn the target can hold
// (messages: every part empty text or reasoning it drops) is built with
// no messages, which its reader refuses as the API would; the caller then
// gets the upstream's 400.
func xfEmptyConversation(to Shape, r *Request, err error) bool {
	var inv *Invalid
	if to != Messages || !errors.As(err, &inv) || inv.Field != "messages" {
		return false
	}
	for i := range r.Messages {
		if msgHasWritable(&r.Messages[i]) {
			return false
		}
	}
	return true
}

func xfAnswer(t *testing.T, from, to Shape, body []byte) {
	cf, ct := codecs[from], codecs[to]
	if cf.parseAnswer == nil || ct.writeAnswer == nil {
		return
	}
	for _, r := range []*Request{nil, {Model: "m"}} {
		out, err := TranslateAnswer(from, to, body, r)
		if err != nil {
			continue
		}
		if !json.Valid(out) {
			t.Fatalf("%s→%s: translated answer is not JSON: %s", from, to, out)
		}
	}
}

// xfStream reads body as SSE, one data event per blank-line-separated
// block (lines of data joined), and translates it; every event the caller
// gets is JSON (or chat's [DONE]).
func xfStream(t *testing.T, from, to Shape, body []byte) {
	cf, ct := codecs[from], codecs[to]
	if cf.newDecoder == nil || ct.newEncoder == nil {
		return
	}
	s, err := NewStream(from, to, &Request{Model: "m", IncludeUsage: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	failed := false
	for _, ev := range dirSplitSSE(body) {
		b, err := s.Event(ev.name, ev.data)
		out = append(out, b...)
		if err != nil {
			out = append(out, s.Fail("upstream_error", err.Error())...)
			failed = true
			break
		}
	}
	if !failed {
		b, err := s.End()
		out = append(out, b...)
		if err != nil {
			out = append(out, s.Fail("upstream_error", err.Error())...)
		}
	}
	for _, ev := range dirSplitSSE(out) {
		if string(ev.data) != "[DONE]" && !json.Valid(ev.data) {
			t.Fatalf("%s→%s: caller event %q is not JSON: %q", from, to, ev.name, ev.data)
		}
	}
}

// FuzzChatMessagesRoundTrip: a neutral request made of fuzzed strings —
// system, user text, an assistant's text and two tool calls, their
// results (one an error), a last user text — written as chat, read,
// written as messages and read again keeps every text (in order), every
// tool call (id, name, arguments as JSON) and every result's id and text.
func FuzzChatMessagesRoundTrip(f *testing.F) {
	f.Add("Be brief.", "What's the weather?", "Checking.", "call_1", "get_weather", "Paris", "14°C", "toolu_2", "Error: timeout", "Thanks")
	f.Add("", " ", "\n", "a", "b", "\x00", "", "c", "\u2028", "<>&")
	f.Add("s", "u", "", "id with spaces", "näme", `{"nested":"json"}`, "r", "x", "", "u2")
	f.Fuzz(func(t *testing.T, system, user, said, id1, name, arg, result, id2, errText, last string) {
		if name == "" || id1 == "" || id2 == "" {
			return // every reader requires a call's name and id
		}
		r := xfRoundTripRequest(system, user, said, id1, name, arg, result, id2, errText, last)
		chatBody, err := BuildRequest(Chat, r)
		if err != nil {
			if !xfAllowedBuildError(err) {
				t.Fatalf("chat build: %T %v", err, err)
			}
			return
		}
		n1, err := ParseRequest(Chat, chatBody)
		if err != nil {
			t.Fatalf("the chat request built does not read: %v\n%s", err, chatBody)
		}
		msgBody, err := BuildRequest(Messages, n1)
		if err != nil {
			t.Fatalf("messages build of what chat read: %v", err)
		}
		n2, err := ParseRequest(Messages, msgBody)
		if err != nil {
			t.Fatalf("the messages request built does not read: %v\n%s", err, msgBody)
		}
		// Chat has no error flag on a tool message: the flag goes into
		// the text (chatToolErrorPrefix), where it stays.
		for i := range r.Messages {
			for j := range r.Messages[i].Parts {
				if p := &r.Messages[i].Parts[j]; p.Type == ToolResult && p.IsError {
					p.IsError = false
					p.Content = []Part{{Type: Text, Text: chatToolErrorPrefix + p.Content[0].Text}}
				}
			}
		}
		want, got := xfKept(t, r), xfKept(t, n2)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip lost something:\n got %q\nwant %q\nchat %s\nmessages %s", got, want, chatBody, msgBody)
		}
	})
}

// xfRoundTripRequest is the neutral request of the round trip's strings.
// Its strings are made valid UTF-8, as every string read from JSON is.
func xfRoundTripRequest(system, user, said, id1, name, arg, result, id2, errText, last string) *Request {
	for _, s := range []*string{&system, &user, &said, &id1, &name, &arg, &result, &id2, &errText, &last} {
		*s = strings.ToValidUTF8(*s, "\uFFFD")
	}
	args1, _ := json.Marshal(map[string]any{"location": arg, "n": 1})
	args2, _ := json.Marshal(map[string]any{"q": []string{arg, user}})
	return &Request{
		Model:  "m",
		System: []string{system},
		Tools:  []Tool{{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)}},
		Messages: []Message{
			{Role: RoleUser, Parts: []Part{{Type: Text, Text: user}}},
			{Role: RoleAssistant, Parts: []Part{
				{Type: Text, Text: said},
				{Type: ToolCall, ID: id1, Name: name, Arguments: string(args1)},
				{Type: ToolCall, ID: id2, Name: name, Arguments: string(args2)},
			}},
			{Role: RoleUser, Parts: []Part{
				{Type: ToolResult, ID: id1, Name: name, Content: []Part{{Type: Text, Text: result}}},
				{Type: ToolResult, ID: id2, Name: name, Content: []Part{{Type: Text, Text: errText}}, IsError: true},
			}},
			{Role: RoleUser, Parts: []Part{{Type: Text, Text: last}}},
		},
	}
}

// xfKept is what a round trip must keep of r, as comparable strings: the
// system text, each non-empty text in order, each tool call (id, name,
// arguments compacted) and each tool result (id, error flag, its text).
// Empty texts are not kept: Anthropic refuses empty text blocks, and an
// empty text says nothing.
func xfKept(t *testing.T, r *Request) []string {
	t.Helper()
	var kept []string
	if sys := msgJoinSystem(r.System); sys != "" {
		kept = append(kept, "system "+sys)
	}
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			switch p.Type {
			case Text:
				if p.Text != "" {
					kept = append(kept, m.Role+" text "+p.Text)
				}
			case ToolCall:
				var args bytes.Buffer
				if err := json.Compact(&args, []byte(p.Arguments)); err != nil {
					t.Fatalf("arguments %q: %v", p.Arguments, err)
				}
				kept = append(kept, fmt.Sprintf("call %q %q %s", p.ID, p.Name, args.String()))
			case ToolResult:
				var texts []string
				for _, c := range p.Content {
					if c.Type == Text && c.Text != "" {
						texts = append(texts, c.Text)
					}
				}
				kept = append(kept, fmt.Sprintf("result %q error=%v %q", p.ID, p.IsError, strings.Join(texts, "\n\n")))
			}
		}
	}
	return kept
}
