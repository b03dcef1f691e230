package xlate

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func msgIndent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// TestMsgAnswerGolden reads Anthropic's documented answers into neutral
// form and writes them back for a messages caller; the written answer
// reads back into the same neutral answer.
func TestMsgAnswerGolden(t *testing.T) {
	for _, name := range []string{"answer_tool_use", "answer_thinking"} {
		t.Run(name, func(t *testing.T) {
			a, err := msgParseAnswer(msgReadFixture(t, name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			msgGolden(t, name+".neutral.json", msgNeutralJSON(t, a))
			out, err := TranslateAnswer(Messages, Messages, msgReadFixture(t, name+".json"), &Request{Model: "claude-caller-alias"})
			if err != nil {
				t.Fatal(err)
			}
			msgGolden(t, name+".written.json", msgIndent(t, out))
			back, err := msgParseAnswer(out)
			if err != nil {
				t.Fatal(err)
			}
			back.Model = a.Model
			if !reflect.DeepEqual(a, back) {
				t.Errorf("round trip changed the answer:\n got %+v\nwant %+v", back, a)
			}
		})
	}
}

// TestMsgWriteAnswerFromNeutral writes an answer as another upstream
// gives it (a chat id, arguments with spaces, usage with every bucket).
func TestMsgWriteAnswerFromNeutral(t *testing.T) {
	a := &Answer{
		ID: "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", Model: "gpt-4o-2024-08-06", Created: 1741569952,
		Parts: []Part{
			{Type: Thinking, Text: "Weather first."},
			{Type: ReasoningItem, ID: "rs_1", Data: "enc"},
			{Type: Text, Text: "Let me look that up: \"SF\" <now>."},
			{Type: ToolCall, ID: "call_abc", Name: "get_weather", Arguments: "{\"location\": \"San Francisco, CA\"}"},
			{Type: ToolCall, ID: "call_def", Name: "get_time"},
		},
		Finish:   FinishToolCalls,
		Usage:    Usage{Input: 10, CacheRead: 20, CacheWrite5m: 3, CacheWrite1h: 4, Output: 50, Reasoning: 30},
		HasUsage: true,
	}
	out, err := msgWriteAnswer(a, &Request{Model: "gpt-4o"})
	if err != nil {
		t.Fatal(err)
	}
	msgGolden(t, "neutral_answer.written.json", msgIndent(t, out))

	a = &Answer{ID: "x", Parts: []Part{{Type: ToolCall, ID: "call_1", Name: "f", Arguments: "[1,2]"}}}
	var m *ErrMalformed
	if _, err := msgWriteAnswer(a, nil); !errors.As(err, &m) {
		t.Errorf("arguments not an object: error %v, want ErrMalformed", err)
	}
}

func TestMsgStopReasons(t *testing.T) {
	for stop, finish := range map[string]string{
		"end_turn": FinishStop, "pause_turn": FinishStop, "max_tokens": FinishLength, "tool_use": FinishToolCalls,
		"stop_sequence": FinishStopSequence, "refusal": FinishContentFilter, "model_context_window_exceeded": FinishLength,
	} {
		if got := msgFinish(stop); got != finish {
			t.Errorf("%s: finish %s, want %s", stop, got, finish)
		}
	}
	for finish, stop := range map[string]string{
		FinishStop: "end_turn", FinishLength: "max_tokens", FinishToolCalls: "tool_use",
		FinishStopSequence: "stop_sequence", FinishContentFilter: "refusal", "": "end_turn",
	} {
		if got := msgStopReason(finish); got != stop {
			t.Errorf("%s: stop_reason %s, want %s", finish, got, stop)
		}
	}
}

func TestMsgParseAnswerUsage(t *testing.T) {
	cases := []struct {
		usage string
		want  Usage
	}{
		{`{"input_tokens":5,"output_tokens":7}`, Usage{Input: 5, Output: 7}},
		{`{"input_tokens":5,"cache_creation_input_tokens":40,"cache_read_input_tokens":9,"output_tokens":7}`, Usage{Input: 5, CacheWrite5m: 40, CacheRead: 9, Output: 7}},
		{`{"input_tokens":5,"cache_creation_input_tokens":40,"cache_creation":{"ephemeral_5m_input_tokens":10,"ephemeral_1h_input_tokens":30},"output_tokens":7}`, Usage{Input: 5, CacheWrite5m: 10, CacheWrite1h: 30, Output: 7}},
		// A breakdown short of the total: the rest is 5-minute writes, as package wire charges.
		{`{"input_tokens":5,"cache_creation_input_tokens":40,"cache_creation":{"ephemeral_1h_input_tokens":30},"output_tokens":7}`, Usage{Input: 5, CacheWrite5m: 10, CacheWrite1h: 30, Output: 7}},
		{`{"input_tokens":null,"output_tokens":7}`, Usage{Output: 7}},
	}
	for _, c := range cases {
		a, err := msgParseAnswer([]byte(`{"type":"message","content":[],"usage":` + c.usage + `}`))
		if err != nil || !a.HasUsage || a.Usage != c.want {
			t.Errorf("%s: usage %+v (%v), want %+v", c.usage, a, err, c.want)
		}
	}
	a, err := msgParseAnswer([]byte(`{"type":"message","content":[]}`))
	if err != nil || a.HasUsage || a.Finish != FinishStop {
		t.Errorf("no usage: %+v, %v", a, err)
	}
}

func TestMsgParseAnswerMalformed(t *testing.T) {
	for _, body := range []string{
		``,
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		`{"type":"message"}`,
		`{"type":"message","content":null}`,
		`{"type":"message","content":{}}`,
		`{"type":"message","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"x"}}]}`,
		`{"type":"message","content":[{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}]}`,
		`{"type":"message","content":[{"type":"tool_use","id":"t","name":"f","input":"x"}]}`,
		`{"type":"message","content":[{"type":"tool_use","name":"f","input":{}}]}`,
		`{"type":"message","content":[],"usage":{"input_tokens":-1}}`,
		`{"type":"message","content":[],"usage":{"output_tokens":1e30}}`,
		`{"type":"message","content":[],"usage":{"output_tokens":1.5}}`,
		`{"type":"message","content":[],"usage":{"input_tokens":9223372036854775807,"output_tokens":1}}`,
		`{"type":"message","content":[],"usage":{"cache_creation":{"ephemeral_1h_input_tokens":-3}}}`,
	} {
		_, err := msgParseAnswer([]byte(body))
		var m *ErrMalformed
		if !errors.As(err, &m) {
			t.Errorf("%s: error %v, want ErrMalformed", body, err)
		}
	}
}
