package xlate

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var respUpdate = flag.Bool("resp.update", false, "rewrite the golden files of testdata/responses")

// respDeterministic makes item ids count up and responses be created at
// a fixed time, for golden files; restored when t ends. Tests that call it
// never run in parallel.
func respDeterministic(t testing.TB) {
	hex, now := respHex, respNow
	n := 0
	respHex = func() string { n++; return fmt.Sprintf("%024x", n) }
	respNow = func() int64 { return 1741487325 }
	t.Cleanup(func() { respHex, respNow = hex, now })
}

// respGolden compares got with a golden file of testdata/responses
// (rewritten with -resp.update).
func respGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "responses", name)
	if *respUpdate {
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

// respIndent is JSON indented, for golden files a reader can follow.
func respIndent(t *testing.T, js []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, js, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, js)
	}
	return append(b.Bytes(), '\n')
}

// respObject is a response object as a caller's SDK reads it.
type respObject struct {
	ID                string                   `json:"id"`
	Object            string                   `json:"object"`
	CreatedAt         int64                    `json:"created_at"`
	Status            string                   `json:"status"`
	Error             *respErrorObj            `json:"error"`
	IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
	Instructions      *string                  `json:"instructions"`
	MaxOutputTokens   *int64                   `json:"max_output_tokens"`
	Model             string                   `json:"model"`
	Output            []respOutItem            `json:"output"`
	ParallelToolCalls *bool                    `json:"parallel_tool_calls"`
	ToolChoice        json.RawMessage          `json:"tool_choice"`
	Tools             []Tool                   `json:"tools"`
	Temperature       json.RawMessage          `json:"temperature"`
	Usage             *struct {
		InputTokens        int64 `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int64 `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int64 `json:"total_tokens"`
	} `json:"usage"`
	Text struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
	Reasoning struct {
		Effort  *string `json:"effort"`
		Summary *string `json:"summary"`
	} `json:"reasoning"`
}

type respErrorObj struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// respOutItem is an output item as Codex and the SDKs read it.
type respOutItem struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Status  string `json:"status"`
	Role    string `json:"role"`
	Content []struct {
		Type        string          `json:"type"`
		Text        string          `json:"text"`
		Annotations json.RawMessage `json:"annotations"`
	} `json:"content"`
	CallID           string        `json:"call_id"`
	Name             string        `json:"name"`
	Arguments        string        `json:"arguments"`
	Summary          []respSummary `json:"summary"`
	EncryptedContent *string       `json:"encrypted_content"`
}

func respReadObject(t *testing.T, js []byte) *respObject {
	t.Helper()
	var o respObject
	if err := json.Unmarshal(js, &o); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	return &o
}

// respAnswerFull is an answer with every kind of part: thinking (two
// signed blocks and a redacted one), text in two parts, two tool calls.
func respAnswerFull() *Answer {
	return &Answer{
		ID: "msg_01XFDUDYJgAACzvnptvVoYEL", Model: "claude-sonnet-4-5", Created: 1741476542,
		Parts: []Part{
			{Type: Thinking, Text: "The user wants the weather.", Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"},
			{Type: RedactedThinking, Data: "EmwKAhgBEgy3va3pzix/LafPsn4a"},
			{Type: Thinking, Text: "I'll call the tool \"get_weather\".\n", Signature: "sig-2"},
			{Type: Text, Text: "Let me check "},
			{Type: Text, Text: "<both> cities."},
			{Type: ToolCall, ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Arguments: `{"location":"Paris, France"}`},
			{Type: ToolCall, ID: "toolu_02", Name: "get_time", Arguments: ""},
		},
		Finish: FinishToolCalls,
		Usage:  Usage{Input: 100, CacheRead: 20, CacheWrite5m: 3, CacheWrite1h: 4, Output: 50, Reasoning: 30}, HasUsage: true,
	}
}

func TestRespWriteAnswerGolden(t *testing.T) {
	respDeterministic(t)
	r := respParse(t, "request_function_tools.json")
	r.Reasoning = &Reasoning{Effort: "high", Summary: "auto"}
	got, err := respWriteAnswer(respAnswerFull(), r)
	if err != nil {
		t.Fatal(err)
	}
	respGolden(t, "answer_full.json", respIndent(t, got))

	o := respReadObject(t, got)
	if o.ID != "resp_01XFDUDYJgAACzvnptvVoYEL" || o.Object != "response" || o.Status != "completed" || o.Model != "gpt-4.1" || o.CreatedAt != 1741476542 {
		t.Errorf("head = %s %s %s %s %d", o.ID, o.Object, o.Status, o.Model, o.CreatedAt)
	}
	if o.Error != nil || o.IncompleteDetails != nil || o.Instructions != nil || o.MaxOutputTokens == nil || *o.MaxOutputTokens != 1024 {
		t.Errorf("error %v incomplete %v instructions %v max %v", o.Error, o.IncompleteDetails, o.Instructions, o.MaxOutputTokens)
	}
	u := o.Usage
	if u == nil || u.InputTokens != 127 || u.InputTokensDetails.CachedTokens != 20 || u.OutputTokens != 50 ||
		u.OutputTokensDetails.ReasoningTokens != 30 || u.TotalTokens != 177 {
		t.Errorf("usage = %+v", u)
	}
	if len(o.Output) != 4 {
		t.Fatalf("output = %+v", o.Output)
	}
	rs, msg, fc1, fc2 := o.Output[0], o.Output[1], o.Output[2], o.Output[3]
	if rs.Type != "reasoning" || len(rs.Summary) != 2 || rs.Summary[1].Text != "I'll call the tool \"get_weather\".\n" || rs.EncryptedContent == nil {
		t.Errorf("reasoning item = %+v", rs)
	}
	if msg.Type != "message" || msg.Role != "assistant" || msg.Status != "completed" || len(msg.Content) != 1 ||
		msg.Content[0].Text != "Let me check <both> cities." || string(msg.Content[0].Annotations) != "[]" {
		t.Errorf("message item = %+v", msg)
	}
	if fc1.Type != "function_call" || fc1.CallID != "toolu_01A09q90qw90lq917835lq9" || fc1.Name != "get_weather" || fc1.Arguments != `{"location":"Paris, France"}` {
		t.Errorf("function call = %+v", fc1)
	}
	if fc2.CallID != "toolu_02" || fc2.Arguments != "{}" {
		t.Errorf("function call without arguments = %+v", fc2)
	}
}

func TestRespWriteAnswerIncomplete(t *testing.T) {
	respDeterministic(t)
	for _, c := range []struct{ finish, reason string }{{FinishLength, "max_output_tokens"}, {FinishContentFilter, "content_filter"}} {
		a := &Answer{ID: "chatcmpl-abc", Model: "up", Parts: []Part{respText("Once upon")}, Finish: c.finish}
		got, err := respWriteAnswer(a, nil)
		if err != nil {
			t.Fatal(err)
		}
		o := respReadObject(t, got)
		if o.Status != "incomplete" || o.IncompleteDetails == nil || o.IncompleteDetails.Reason != c.reason {
			t.Errorf("%s: status %s details %+v", c.finish, o.Status, o.IncompleteDetails)
		}
		if o.ID != "resp_abc" || o.Model != "up" || o.Usage != nil || o.CreatedAt != 1741487325 {
			t.Errorf("%s: id %s model %s usage %v created %d", c.finish, o.ID, o.Model, o.Usage, o.CreatedAt)
		}
		if c.finish == FinishLength {
			respGolden(t, "answer_incomplete.json", respIndent(t, got))
		}
	}
}

// TestRespWriteAnswerEcho: the response repeats what the caller asked.
func TestRespWriteAnswerEcho(t *testing.T) {
	respDeterministic(t)
	r := respParse(t, "request_image.json")
	r.System = append(r.System, "Second.")
	got, err := respWriteAnswer(&Answer{ID: "x", Parts: []Part{respText("A boardwalk.")}, Finish: FinishStop}, r)
	if err != nil {
		t.Fatal(err)
	}
	respGolden(t, "answer_echo.json", respIndent(t, got))
	o := respReadObject(t, got)
	if o.Instructions == nil || *o.Instructions != "Describe images plainly.\n\nSecond." {
		t.Errorf("instructions = %v", o.Instructions)
	}
	respSameJSON(t, "text.format", o.Text.Format, json.RawMessage(`{"type":"json_schema","name":"scene","strict":true,
		"schema":{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"],"additionalProperties":false}}`))
	if string(o.ToolChoice) != `"auto"` || o.Tools == nil || len(o.Tools) != 0 || o.ParallelToolCalls == nil || !*o.ParallelToolCalls {
		t.Errorf("tool_choice %s tools %v parallel %v", o.ToolChoice, o.Tools, o.ParallelToolCalls)
	}
	if string(o.Temperature) != "null" || o.Reasoning.Effort != nil || o.Reasoning.Summary != nil {
		t.Errorf("temperature %s reasoning %+v", o.Temperature, o.Reasoning)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(got, &top); err != nil {
		t.Fatal(err)
	}
	if _, ok := top["output_text"]; ok {
		t.Error("output_text is an SDK convenience, not a field of the response")
	}
}

// TestRespWriteAnswerRoundTrip: a responses caller's request and the
// answer written for it keep texts, tool calls, ids and usage exactly.
func TestRespWriteAnswerRoundTrip(t *testing.T) {
	a := respAnswerFull()
	got, err := respWriteAnswer(a, &Request{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	o := respReadObject(t, got)
	// The caller sends the output back as input items of its next turn.
	items, err := json.Marshal(o.Output)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRequest(Responses, []byte(`{"model":"m","input":`+string(items)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Message{{Role: RoleAssistant, Parts: []Part{
		a.Parts[0], a.Parts[1], a.Parts[2],
		respText("Let me check <both> cities."),
		a.Parts[5],
		{Type: ToolCall, ID: "toolu_02", Name: "get_time", Arguments: "{}"},
	}}}
	if !reflect.DeepEqual(r.Messages, want) {
		t.Errorf("messages =\n%+v\nwant\n%+v", r.Messages, want)
	}
}
