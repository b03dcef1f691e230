package xlate

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestChatBuildRequestNeutral writes what only other shapes bring (signed
// and redacted thinking, an error result, a budget, a named tool, a
// schema) as the golden file says, and reads it back.
func TestChatBuildRequestNeutral(t *testing.T) {
	r := &Request{
		Model:  "deepseek-chat",
		System: []string{"Be brief.", "Answer in French."},
		Messages: []Message{
			{Role: RoleUser, Parts: []Part{{Type: Text, Text: "Weather <Paris> & \"Lyon\"?"}}},
			{Role: RoleAssistant, Parts: []Part{
				{Type: Thinking, Text: "Two cities.", Signature: "EqQBCgIYAhIM"},
				{Type: RedactedThinking, Data: "EmwKAhgBEgy3va3pzix"},
				{Type: ReasoningItem, ID: "rs_1", Data: "gAAAA"},
				{Type: Text, Text: "Checking "},
				{Type: Text, Text: "both."},
				{Type: ToolCall, ID: "toolu_1", Name: "weather", Arguments: `{"city":"Paris"}`, Signature: "CiQB"},
				{Type: ToolCall, ID: "toolu_2", Name: "weather"},
			}},
			{Role: RoleUser, Parts: []Part{
				{Type: ToolResult, ID: "toolu_1", Name: "weather", Content: []Part{{Type: Text, Text: "12C"}, {Type: Text, Text: "rain"}}},
				{Type: ToolResult, ID: "toolu_2", Name: "weather", IsError: true, Content: []Part{{Type: Text, Text: "city unknown"}}},
				{Type: Text, Text: "And tomorrow?"},
				{Type: Image, MediaType: "image/jpeg", Data: "/9j/4AAQ"},
			}},
		},
		Tools:      []Tool{{Name: "weather", Parameters: json.RawMessage(`{"type":"object"}`)}},
		ToolChoice: &ToolChoice{Mode: ChoiceTool, Name: "weather"},
		MaxTokens:  2000,
		TopK:       json.RawMessage(`40`),
		Format:     &Format{Type: "json_schema", Schema: json.RawMessage(`{"type":"object"}`)},
		Reasoning:  &Reasoning{Budget: 4096},
		Stream:     true,
	}
	built, err := chatBuildRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	chatGolden(t, "request_neutral.built.json", built)
	back, err := chatParseRequest(built)
	if err != nil {
		t.Fatal(err)
	}
	// The ReasoningItem is left out: only an OpenAI line could read it.
	if got := back.Messages[1].Parts; len(got) != 5 || !reflect.DeepEqual(got[:2], r.Messages[1].Parts[:2]) ||
		got[2].Text != "Checking both." || got[3].Signature != "CiQB" || got[4].Arguments != "{}" {
		t.Errorf("assistant turn read back as %+v", got)
	}
	res := back.Messages[2].Parts
	if len(res) != 2 || res[1].Content[0].Text != chatToolErrorPrefix+"city unknown" || back.Messages[3].Parts[1].Data != "/9j/4AAQ" {
		t.Errorf("results read back as %+v, then %+v", res, back.Messages[3])
	}
	if back.Reasoning.Effort != "medium" || !back.IncludeUsage || back.Format.Name != "response" {
		t.Errorf("parameters read back as %+v, usage %v, %+v", back.Reasoning, back.IncludeUsage, back.Format)
	}
}

func TestChatBuildRequestEffort(t *testing.T) {
	for _, c := range []struct {
		rs   *Reasoning
		want string
	}{
		{nil, ""}, {&Reasoning{Off: true}, "minimal"}, {&Reasoning{Effort: "high"}, "high"},
		{&Reasoning{Budget: 1024}, "low"}, {&Reasoning{Budget: 2048}, "low"}, {&Reasoning{Budget: 2049}, "medium"},
		{&Reasoning{Budget: 8192}, "medium"}, {&Reasoning{Budget: 8193}, "high"},
	} {
		if got := chatEffortOut(c.rs); got != c.want {
			t.Errorf("%+v: %q, want %q", c.rs, got, c.want)
		}
	}
	r := &Request{Messages: []Message{{Role: RoleUser, Parts: []Part{{Type: ToolResult, ID: "c", Content: []Part{{Type: Image, URL: "https://x"}}}}}}}
	var u *Unsupported
	if _, err := chatBuildRequest(r); !errors.As(err, &u) || u.Target != Chat {
		t.Errorf("image in a tool result: %v", err)
	}
}

// TestChatAnswerRoundTrip reads OpenAI's documented tool-call answer,
// writes it for a chat caller as the golden file says, and reads that back
// to the same parts, finish and usage.
func TestChatAnswerRoundTrip(t *testing.T) {
	a, err := chatParseAnswer(chatRead(t, "answer_tool_calls.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Answer{
		ID: "chatcmpl-abc123", Model: "gpt-4o-mini", Created: 1699896916,
		Parts:  []Part{{Type: ToolCall, ID: "call_abc123", Name: "get_current_weather", Arguments: "{\n\"location\": \"Boston, MA\"\n}"}},
		Finish: FinishToolCalls,
		Usage:  Usage{Input: 18, CacheRead: 64, Output: 17}, HasUsage: true,
	}
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("read %+v\nwant %+v", a, want)
	}
	out, err := chatWriteAnswer(a, &Request{Model: "my-alias"})
	if err != nil {
		t.Fatal(err)
	}
	chatGolden(t, "answer_tool_calls.written.json", out)
	back, err := chatParseAnswer(out)
	if err != nil {
		t.Fatal(err)
	}
	want.Model = "my-alias"
	if !reflect.DeepEqual(back, want) {
		t.Errorf("read back %+v\nwant %+v", back, want)
	}
}

// TestChatWriteAnswerThinking writes thinking the chat way (reasoning
// content and details), a Gemini signature, usage with cache writes.
func TestChatWriteAnswerThinking(t *testing.T) {
	a := &Answer{
		ID: "msg_01XFDUDYJgAACzvnptvVoYEL", Model: "claude-sonnet-4-5", Created: 1,
		Parts: []Part{
			{Type: Thinking, Text: "First.", Signature: "sig"},
			{Type: RedactedThinking, Data: "red"},
			{Type: Thinking, Text: "Second."},
			{Type: Text, Text: "Hi "},
			{Type: Text, Text: "there."},
			{Type: ToolCall, ID: "call_0", Name: "f", Arguments: `{"a":1}`, Signature: "gsig"},
		},
		Finish: FinishStopSequence, StopSequence: "END",
		Usage:    Usage{Input: 10, CacheRead: 20, CacheWrite5m: 30, CacheWrite1h: 40, Output: 50, Reasoning: 5},
		HasUsage: true,
	}
	out, err := chatWriteAnswer(a, &Request{Model: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	chatGolden(t, "answer_thinking.written.json", out)
	back, err := chatParseAnswer(out)
	if err != nil {
		t.Fatal(err)
	}
	wantParts := []Part{a.Parts[0], a.Parts[1], a.Parts[2], {Type: Text, Text: "Hi there."}, a.Parts[5]}
	if back.ID != "chatcmpl-01XFDUDYJgAACzvnptvVoYEL" || !reflect.DeepEqual(back.Parts, wantParts) || back.Finish != FinishToolCalls {
		t.Errorf("read back %+v", back)
	}
	if u := back.Usage; u.PromptTotal() != a.Usage.PromptTotal() || u.CacheRead != 20 || u.Output != 50 || u.Reasoning != 5 {
		t.Errorf("usage read back %+v", u)
	}
	empty, _ := chatWriteAnswer(&Answer{Finish: FinishLength}, &Request{})
	if !strings.Contains(string(empty), `"content":null`) || !strings.Contains(string(empty), `"finish_reason":"length"`) ||
		strings.Contains(string(empty), `"usage"`) || !strings.Contains(string(empty), `"id":"chatcmpl-`) {
		t.Errorf("empty answer written as %s", empty)
	}
}

func TestChatParseAnswerShapes(t *testing.T) {
	for _, c := range []struct {
		body   string
		parts  []Part
		finish string
	}{
		{`{"choices":[{"message":{"content":"x","reasoning":"r"},"finish_reason":"length"}]}`,
			[]Part{{Type: Thinking, Text: "r"}, {Type: Text, Text: "x"}}, FinishLength},
		{`{"choices":[{"message":{"content":null,"refusal":"I can't."},"finish_reason":"content_filter"}]}`,
			[]Part{{Type: Text, Text: "I can't."}}, FinishContentFilter},
		{`{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"a":1}}},{"function":{"name":"g"}}]},"finish_reason":"eos"}]}`,
			[]Part{{Type: ToolCall, ID: "call_0", Name: "f", Arguments: `{"a":1}`}, {Type: ToolCall, ID: "call_1", Name: "g"}}, FinishToolCalls},
		{`{"choices":[{"message":{"content":"x"},"finish_reason":null}]}`, []Part{{Type: Text, Text: "x"}}, FinishStop},
	} {
		a, err := chatParseAnswer([]byte(c.body))
		if err != nil || !reflect.DeepEqual(a.Parts, c.parts) || a.Finish != c.finish || a.HasUsage {
			t.Errorf("%s: read %+v, %v", c.body, a, err)
		}
	}
}

func TestChatParseAnswerMalformed(t *testing.T) {
	for _, body := range []string{
		``, `[]`, `{"choices":[]}`, `{"object":"chat.completion"}`, `{"choices":[{}]}`,
		`{"choices":[{"message":{"content":5}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"arguments":"{}"}}]}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"id":"c","type":"custom","function":{"name":"f"}}]}}]}`,
		`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":-1}}`,
		`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":1.5}}`,
		`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":99999999999999999999}}`,
		`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":9007199254740993}}`,
		`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":6}}}`,
	} {
		_, err := chatParseAnswer([]byte(body))
		var m *ErrMalformed
		if !errors.As(err, &m) {
			t.Errorf("%s: got %v, want ErrMalformed", body, err)
		}
	}
}
