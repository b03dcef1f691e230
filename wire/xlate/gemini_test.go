package xlate

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var gemUpdate = flag.Bool("gemupdate", false, "rewrite the golden files of testdata/gemini")

// gemCheckGolden compares got with testdata/gemini/name, or writes it with
// -gemupdate (read the diff: every value was checked by hand).
func gemCheckGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "gemini", name)
	if *gemUpdate {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -gemupdate writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n got: %s\nwant: %s", path, got, want)
	}
}

func gemIndent(t *testing.T, body []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, body, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, body)
	}
	return append(b.Bytes(), '\n')
}

func gemRead(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "gemini", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGemPath(t *testing.T) {
	for _, c := range []struct {
		model       string
		stream      bool
		path, query string
	}{
		{"gemini-2.5-flash", false, "/v1beta/models/gemini-2.5-flash:generateContent", ""},
		{"gemini-2.5-pro", true, "/v1beta/models/gemini-2.5-pro:streamGenerateContent", "alt=sse"},
		{"tuned/my model", false, "/v1beta/models/tuned%2Fmy%20model:generateContent", ""},
	} {
		p, q := GeminiPath(c.model, c.stream)
		if p != c.path || q != c.query {
			t.Errorf("GeminiPath(%q, %v) = %q, %q; want %q, %q", c.model, c.stream, p, q, c.path, c.query)
		}
	}
	c := codecs[Gemini]
	if c == nil || c.buildRequest == nil || c.parseAnswer == nil || c.newDecoder == nil {
		t.Fatal("the Gemini codec lacks an upstream's direction")
	}
	if c.parseRequest != nil || c.writeAnswer != nil || c.newEncoder != nil {
		t.Fatal("Gemini is an upstream's format only")
	}
}

// gemGoldenRequest is a second turn of a thinking, tool-calling chat: a
// system prompt, an image by data and one by URL, the model's signed
// thought and signed function call answered by a tool result (and an
// error result of a call without id), plus everything Gemini drops.
func gemGoldenRequest() *Request {
	par := true
	return &Request{
		Model:  "gemini-2.5-flash",
		System: []string{"You are a weather assistant.", "Answer in one sentence."},
		Messages: []Message{
			{Role: RoleUser, Parts: []Part{
				{Type: Text, Text: "What is the weather where these were taken?"},
				{Type: Image, Data: "iVBORw0KGgo=", MediaType: "image/png"},
				{Type: Image, URL: "https://example.com/photos/eiffel.webp?size=large"},
			}},
			{Role: RoleAssistant, Parts: []Part{
				{Type: ReasoningItem, ID: "rs_1", Data: "gAAAA-openai-only"},
				{Type: Thinking, Text: "Both photos show Paris."},
				{Type: Thinking, Text: "I should look it up.", Signature: "Cs4BAdHtim9sig1"},
				{Type: RedactedThinking, Data: "EmwKAhgBEgy-anthropic-only"},
				{Type: Text, Text: "Let me check."},
				{Type: ToolCall, ID: "call_0", Name: "get_weather", Arguments: `{"location": "Paris, France"}`, Signature: "CiQB0e2Kb3sig2"},
				{Type: ToolCall, Name: "get_time", Arguments: ""},
			}},
			{Role: RoleUser, Parts: []Part{
				{Type: ToolResult, ID: "call_0", Content: []Part{{Type: Text, Text: "18°C"}, {Type: Text, Text: "light rain"}}},
				{Type: ToolResult, Name: "get_time", IsError: true, Content: []Part{{Type: Text, Text: "timezone service <down>"}}},
			}},
		},
		Tools: []Tool{
			{Name: "get_weather", Description: "Current weather at a location.", Strict: true,
				Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`)},
			{Name: "get_time"},
		},
		ToolChoice:        &ToolChoice{Mode: ChoiceAuto},
		ParallelToolCalls: &par,
		MaxTokens:         1024,
		Temperature:       json.RawMessage(`0.70`),
		TopP:              json.RawMessage(`0.95`),
		TopK:              json.RawMessage(`40`),
		Stop:              []string{"END"},
		User:              "user-42",
		Metadata:          map[string]string{"trace": "t1"},
		Reasoning:         &Reasoning{Effort: "medium"},
		Stream:            true,
	}
}

// TestGeminiBuildRequestGolden: testdata/gemini/request.json is the body
// of gemGoldenRequest, in the shape of Google's documented requests.
func TestGemBuildRequestGolden(t *testing.T) {
	body, err := BuildRequest(Gemini, gemGoldenRequest())
	if err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"user-42", "trace", "parallel", "gAAAA", "EmwKAhgB", "Both photos", "strict", "model\":\"gemini"} {
		if bytes.Contains(body, []byte(absent)) {
			t.Errorf("the body carries %q, which Gemini has no field for", absent)
		}
	}
	gemCheckGolden(t, "request.json", gemIndent(t, body))
}

func TestGemBuildRequestCases(t *testing.T) {
	user := func(parts ...Part) []Message { return []Message{{Role: RoleUser, Parts: parts}} }
	hi := user(Part{Type: Text, Text: "hi"})
	cases := []struct {
		name string
		req  Request
		want string // a fragment of the body, or of the error
	}{
		{"nothing but a message", Request{Messages: hi}, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
		{"thinking off", Request{Messages: hi, Reasoning: &Reasoning{Off: true}}, `"generationConfig":{"thinkingConfig":{"thinkingBudget":0}}`},
		{"effort none", Request{Messages: hi, Reasoning: &Reasoning{Effort: "none"}}, `"thinkingConfig":{"thinkingBudget":0}`},
		{"effort minimal", Request{Messages: hi, Reasoning: &Reasoning{Effort: "minimal"}}, `"thinkingConfig":{"thinkingBudget":1024,"includeThoughts":true}`},
		{"effort high", Request{Messages: hi, Reasoning: &Reasoning{Effort: "high"}}, `"thinkingBudget":16384`},
		{"budget", Request{Messages: hi, Reasoning: &Reasoning{Budget: 3000, Effort: "low"}}, `"thinkingBudget":3000,"includeThoughts":true`},
		{"summary only", Request{Messages: hi, Reasoning: &Reasoning{Summary: "auto"}}, `"thinkingConfig":{"includeThoughts":true}`},
		{"unknown effort", Request{Messages: hi, Reasoning: &Reasoning{Effort: "max"}}, `reasoning.effort: unknown effort "max"`},
		{"json object", Request{Messages: hi, Format: &Format{Type: "json_object"}}, `"generationConfig":{"responseMimeType":"application/json"}`},
		{"json schema", Request{Messages: hi, Format: &Format{Type: "json_schema", Name: "x", Strict: true, Schema: json.RawMessage(`{"type":"object"}`)}},
			`"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"type":"object"}}`},
		{"named tool", Request{Messages: hi, ToolChoice: &ToolChoice{Mode: ChoiceTool, Name: "f"}}, `"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f"]}}`},
		{"required", Request{Messages: hi, ToolChoice: &ToolChoice{Mode: ChoiceRequired}}, `"functionCallingConfig":{"mode":"ANY"}`},
		{"none", Request{Messages: hi, ToolChoice: &ToolChoice{Mode: ChoiceNone}}, `"functionCallingConfig":{"mode":"NONE"}`},
		{"data URL", Request{Messages: user(Part{Type: Image, URL: "data:image/gif;base64,R0lGOD=="})}, `{"inlineData":{"mimeType":"image/gif","data":"R0lGOD=="}}`},
		{"URL without extension", Request{Messages: user(Part{Type: Image, URL: "gs://bucket/img"})}, `{"fileData":{"mimeType":"image/jpeg","fileUri":"gs://bucket/img"}}`},
		{"URL with media type", Request{Messages: user(Part{Type: Image, URL: "https://x/a.png", MediaType: "image/webp"})}, `"mimeType":"image/webp"`},
		{"tool result with an image", Request{Messages: []Message{
			{Role: RoleAssistant, Parts: []Part{{Type: ToolCall, ID: "t1", Name: "shot", Arguments: "{}"}}},
			{Role: RoleUser, Parts: []Part{{Type: ToolResult, ID: "t1", Content: []Part{{Type: Image, Data: "AAAA", MediaType: "image/png"}}}}}}},
			`{"role":"user","parts":[{"functionResponse":{"id":"t1","name":"shot","response":{"output":""}}},{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]}`},
		{"only dropped parts", Request{Messages: []Message{{Role: RoleAssistant, Parts: []Part{{Type: ReasoningItem, ID: "rs"}, {Type: Text}}}, {Role: RoleUser, Parts: []Part{{Type: Text, Text: "go"}}}}},
			`{"contents":[{"role":"user","parts":[{"text":"go"}]}]}`},
		{"signed thought without text", Request{Messages: []Message{{Role: RoleAssistant, Parts: []Part{{Type: Thinking, Signature: "s"}}}}},
			`"parts":[{"text":"","thought":true,"thoughtSignature":"s"}]`},
		{"result of no call", Request{Messages: user(Part{Type: ToolResult, ID: "call_9", Content: []Part{{Type: Text, Text: "x"}}})},
			`messages[0].parts[0]: the result of tool call "call_9" answers no earlier tool call`},
		{"arguments not an object", Request{Messages: []Message{{Role: RoleAssistant, Parts: []Part{{Type: ToolCall, ID: "a", Name: "f", Arguments: "[1]"}}}}},
			"messages[0].parts[0].arguments: must be a JSON object"},
		{"arguments not JSON", Request{Messages: []Message{{Role: RoleAssistant, Parts: []Part{{Type: ToolCall, ID: "a", Name: "f", Arguments: `{"a":`}}}}},
			"messages[0].parts[0].arguments: must be a JSON object"},
		{"bad temperature", Request{Messages: hi, Temperature: json.RawMessage(`0.7.1`)}, "temperature: is not valid JSON"},
		{"bad schema", Request{Messages: hi, Tools: []Tool{{Name: "f", Parameters: json.RawMessage(`{`)}}}, "tools[0].parameters: is not valid JSON"},
		{"unknown choice", Request{Messages: hi, ToolChoice: &ToolChoice{Mode: "sometimes"}}, `tool_choice: unknown mode "sometimes"`},
		{"non-base64 data URL", Request{Messages: user(Part{Type: Image, URL: "data:image/png,%89PNG"})}, "a data: URL image must be base64"},
		{"unknown role", Request{Messages: []Message{{Role: "system", Parts: []Part{{Type: Text, Text: "x"}}}}}, `messages[0].role: unknown role "system"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, err := BuildRequest(Gemini, &c.req)
			if err != nil {
				var inv *Invalid
				if !errors.As(err, &inv) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v (%T), want an *Invalid with %q", err, err, c.want)
				}
				return
			}
			if !json.Valid(body) || !bytes.Contains(body, []byte(c.want)) {
				t.Fatalf("body %s\nlacks %s", body, c.want)
			}
		})
	}
}

// gemPartView is a Part with its zero fields left out, for goldens.
type gemPartView struct {
	Type      string        `json:"type"`
	Text      string        `json:"text,omitempty"`
	Signature string        `json:"signature,omitempty"`
	Data      string        `json:"data,omitempty"`
	MediaType string        `json:"media_type,omitempty"`
	URL       string        `json:"url,omitempty"`
	ID        string        `json:"id,omitempty"`
	Name      string        `json:"name,omitempty"`
	Arguments string        `json:"arguments,omitempty"`
	Content   []gemPartView `json:"content,omitempty"`
	IsError   bool          `json:"is_error,omitempty"`
}

var gemTypeNames = map[PartType]string{
	Text: "text", Image: "image", ToolCall: "tool_call", ToolResult: "tool_result",
	Thinking: "thinking", RedactedThinking: "redacted_thinking", ReasoningItem: "reasoning_item",
}

func gemPartViews(ps []Part) []gemPartView {
	var vs []gemPartView
	for _, p := range ps {
		vs = append(vs, gemPartView{gemTypeNames[p.Type], p.Text, p.Signature, p.Data, p.MediaType, p.URL, p.ID, p.Name, p.Arguments, gemPartViews(p.Content), p.IsError})
	}
	return vs
}

// gemAnswerJSON is what a golden file records of a neutral Answer.
func gemAnswerJSON(t *testing.T, a *Answer) []byte {
	t.Helper()
	v := struct {
		ID, Model    string
		Created      int64 `json:",omitempty"`
		Parts        []gemPartView
		Finish       string
		StopSequence string `json:",omitempty"`
		Usage        Usage
		HasUsage     bool
	}{a.ID, a.Model, a.Created, gemPartViews(a.Parts), a.Finish, a.StopSequence, a.Usage, a.HasUsage}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestGeminiParseAnswerGolden: a thinking model's parallel function calls
// (the first signed, neither with an id) as Google documents them.
// answer.golden was checked by hand: ids call_0 and call_1, finish
// tool_calls (STOP with calls), usage 87 in, 36 + 106 out of which 106
// reasoning.
func TestGemParseAnswerGolden(t *testing.T) {
	a, err := gemParseAnswer(gemRead(t, "answer.json"))
	if err != nil {
		t.Fatal(err)
	}
	gemCheckGolden(t, "answer.golden", gemAnswerJSON(t, a))
}

func TestGemParseAnswerCases(t *testing.T) {
	cases := []struct {
		name string
		body string
		want Answer
	}{
		{"text", `{"candidates":[{"content":{"parts":[{"text":"Hello"},{"text":" world","thoughtSignature":"sig"}],"role":"model"},"finishReason":"STOP"}],"responseId":"r","modelVersion":"m"}`,
			Answer{ID: "r", Model: "m", Parts: []Part{{Type: Text, Text: "Hello world"}}, Finish: FinishStop}},
		{"max tokens", `{"candidates":[{"content":{"parts":[{"text":"Hel"}]},"finishReason":"MAX_TOKENS"}]}`,
			Answer{Parts: []Part{{Type: Text, Text: "Hel"}}, Finish: FinishLength}},
		{"max tokens in a call", `{"candidates":[{"content":{"parts":[{"functionCall":{"id":"fc_1","name":"f"}}]},"finishReason":"MAX_TOKENS"}]}`,
			Answer{Parts: []Part{{Type: ToolCall, ID: "fc_1", Name: "f", Arguments: "{}"}}, Finish: FinishLength}},
		{"safety, no content", `{"candidates":[{"finishReason":"SAFETY","index":0}]}`, Answer{Finish: FinishContentFilter}},
		{"recitation", `{"candidates":[{"content":{"parts":[]},"finishReason":"RECITATION"}]}`, Answer{Finish: FinishContentFilter}},
		{"other reason", `{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"MALFORMED_FUNCTION_CALL"}]}`,
			Answer{Parts: []Part{{Type: Text, Text: "x"}}, Finish: FinishStop}},
		{"blocked prompt", `{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[]},"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7},"modelVersion":"m"}`,
			Answer{Model: "m", Finish: FinishContentFilter, Usage: Usage{Input: 7}, HasUsage: true}},
		{"thoughts, split by a signature", `{"candidates":[{"content":{"parts":[{"text":"a","thought":true},{"text":"b","thought":true,"thoughtSignature":"s1"},{"text":"c","thought":true},{"text":"","thought":true,"thoughtSignature":"s2"},{"text":"done"}]},"finishReason":"STOP"}]}`,
			Answer{Parts: []Part{{Type: Thinking, Text: "ab", Signature: "s1"}, {Type: Thinking, Text: "c", Signature: "s2"}, {Type: Text, Text: "done"}}, Finish: FinishStop}},
		{"cached and tool-use usage", `{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":60,"toolUsePromptTokenCount":5,"candidatesTokenCount":3,"thoughtsTokenCount":2}}`,
			Answer{Parts: []Part{{Type: Text, Text: "x"}}, Finish: FinishStop, Usage: Usage{Input: 45, CacheRead: 60, Output: 5, Reasoning: 2}, HasUsage: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := gemParseAnswer([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := gemAnswerJSON(t, a), gemAnswerJSON(t, &c.want); !bytes.Equal(got, want) {
				t.Fatalf("got %s\nwant %s", got, want)
			}
		})
	}
}

func TestGemParseAnswerMalformed(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"error body", `{"error":{"code":400,"message":"API key not valid","status":"INVALID_ARGUMENT"}}`, `is an error (status "INVALID_ARGUMENT")`},
		{"not Gemini", `{"choices":[]}`, "neither candidates nor promptFeedback"},
		{"empty candidates", `{"candidates":[]}`, "neither candidates nor promptFeedback"},
		{"not JSON", `data: {}`, "invalid JSON at byte"},
		{"wrong type", `{"candidates":{}}`, "candidates must be"},
		{"args not an object", `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":[1]}}]},"finishReason":"STOP"}]}`, "functionCall.args is not a JSON object"},
		{"call without name", `{"candidates":[{"content":{"parts":[{"functionCall":{"args":{}}}]},"finishReason":"STOP"}]}`, "functionCall without a name"},
		{"negative usage", `{"candidates":[],"promptFeedback":{},"usageMetadata":{"candidatesTokenCount":-4}}`, "usageMetadata.candidatesTokenCount is negative (-4)"},
		{"cached above prompt", `{"promptFeedback":{},"usageMetadata":{"promptTokenCount":1,"cachedContentTokenCount":2}}`, "cachedContentTokenCount (2) is above"},
		{"output overflow", `{"promptFeedback":{},"usageMetadata":{"candidatesTokenCount":9223372036854775807,"thoughtsTokenCount":9}}`, "overflows the output count"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := gemParseAnswer([]byte(c.body))
			var m *ErrMalformed
			if !errors.As(err, &m) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want an *ErrMalformed with %q", err, c.want)
			}
			if strings.Contains(err.Error(), "API key") {
				t.Fatalf("error %q quotes the body", err)
			}
		})
	}
}

// TestGeminiRoundTrip: an answer read and its parts sent back as the next
// turn keep each call's id, name, arguments and signature, and a tool
// result finds its call's name.
func TestGemRoundTrip(t *testing.T) {
	a, err := gemParseAnswer(gemRead(t, "answer.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := &Request{Messages: []Message{
		{Role: RoleUser, Parts: []Part{{Type: Text, Text: "Weather and time in Paris?"}}},
		{Role: RoleAssistant, Parts: a.Parts},
		{Role: RoleUser, Parts: []Part{
			{Type: ToolResult, ID: "call_0", Content: []Part{{Type: Text, Text: "18°C"}}},
			{Type: ToolResult, ID: "call_1", Content: []Part{{Type: Text, Text: "14:05"}}},
		}},
	}}
	body, err := gemBuildRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		Contents []struct {
			Parts []struct {
				FunctionCall *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
				FunctionResponse *struct{ ID, Name string } `json:"functionResponse"`
				ThoughtSignature string                     `json:"thoughtSignature"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range w.Contents {
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				got = append(got, fmt.Sprintf("call %s %s %s %q", p.FunctionCall.ID, p.FunctionCall.Name, p.FunctionCall.Args, p.ThoughtSignature))
			case p.FunctionResponse != nil:
				got = append(got, "result "+p.FunctionResponse.ID+" "+p.FunctionResponse.Name)
			}
		}
	}
	want := []string{
		`call call_0 get_weather {"location":"Paris, France","unit":"celsius"} "CiQB0e2Kb3nP6xW+9g1yq1sR4b0mFf0Wl9o8w0s8bq0hZc2nYJQKYgHR7YpvQ0x0nA=="`,
		`call call_1 get_time {"timezone":"Europe/Paris"} ""`,
		"result call_0 get_weather",
		"result call_1 get_time",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
