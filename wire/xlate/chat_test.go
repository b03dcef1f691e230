package xlate

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

var chatUpdate = flag.Bool("chat.update", false, "rewrite the golden files of testdata/chat")

// chatRead is a file of testdata/chat.
func chatRead(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "chat", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var chatCreated = regexp.MustCompile(`"created":[0-9]+`)

// chatGolden compares got, its created times made 0, with the golden file
// name (rewritten under -chat.update).
func chatGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	got = chatCreated.ReplaceAll(got, []byte(`"created":0`))
	path := filepath.Join("testdata", "chat", name)
	if *chatUpdate {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\ngot  %s\nwant %s", name, got, want)
	}
}

// chatCompact is raw compacted, nil for nil.
func chatCompact(t testing.TB, raw json.RawMessage) json.RawMessage {
	t.Helper()
	if raw == nil {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return b.Bytes()
}

// chatNormal is r with its raw JSON compacted, for comparing.
func chatNormal(t testing.TB, r *Request) *Request {
	t.Helper()
	c := *r
	c.Tools = append([]Tool(nil), r.Tools...)
	for i := range c.Tools {
		c.Tools[i].Parameters = chatCompact(t, c.Tools[i].Parameters)
	}
	if r.Format != nil {
		f := *r.Format
		f.Schema = chatCompact(t, f.Schema)
		c.Format = &f
	}
	c.Temperature, c.TopP, c.TopK = chatCompact(t, r.Temperature), chatCompact(t, r.TopP), chatCompact(t, r.TopK)
	return &c
}

func chatSameRequest(t *testing.T, got, want *Request) {
	t.Helper()
	g, w := chatNormal(t, got), chatNormal(t, want)
	if !reflect.DeepEqual(g, w) {
		gj, _ := json.MarshalIndent(g, "", " ")
		wj, _ := json.MarshalIndent(w, "", " ")
		t.Errorf("request differs:\ngot  %s\nwant %s", gj, wj)
	}
}

func chatPtr[T any](v T) *T { return &v }

// chatWantTools is what request_tools.json reads as.
func chatWantTools() *Request {
	weather := func(id, city string) Part {
		return Part{Type: ToolCall, ID: id, Name: "get_weather", Arguments: `{"location":"` + city + `"}`}
	}
	result := func(id, text string) Part {
		return Part{Type: ToolResult, ID: id, Name: "get_weather", Content: []Part{{Type: Text, Text: text}}}
	}
	return &Request{
		Model:  "gpt-4.1",
		System: []string{"You are a helpful assistant."},
		Messages: []Message{
			{Role: RoleUser, Parts: []Part{
				{Type: Text, Text: "What's the weather like in Paris today, and what is in this image?"},
				{Type: Image, URL: "https://upload.wikimedia.org/wikipedia/commons/thumb/d/dd/Gfp-wisconsin-madison-the-nature-boardwalk.jpg/2560px-Gfp-wisconsin-madison-the-nature-boardwalk.jpg"},
				{Type: Image, MediaType: "image/png", Data: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="},
			}},
			{Role: RoleAssistant, Parts: []Part{weather("call_12345xyz", "Paris, France"), weather("call_67890abc", "Bogotá, Colombia")}},
			{Role: RoleUser, Parts: []Part{result("call_12345xyz", "14°C, light rain"), result("call_67890abc", "18°C, sunny")}},
		},
		Tools: []Tool{{
			Name:        "get_weather",
			Description: "Get current temperature for provided coordinates in celsius.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"location":{"type":"string","description":"City and country e.g. Bogotá, Colombia"}},"required":["location"],"additionalProperties":false}`),
			Strict:      true,
		}},
		ToolChoice:        &ToolChoice{Mode: ChoiceAuto},
		ParallelToolCalls: chatPtr(true),
		MaxTokens:         1024,
		Temperature:       json.RawMessage(`0.70`),
		TopP:              json.RawMessage(`1`),
		Stop:              []string{"\n\nUser:"},
		User:              "user-1234",
		Metadata:          map[string]string{"session": "abc"},
		Reasoning:         &Reasoning{Effort: "low"},
		Stream:            true,
		IncludeUsage:      true,
	}
}

// TestChatRequestRoundTrip reads OpenAI's documented shapes (tools, a tool
// call turn and its results, images by URL and data URL), writes them for
// a chat upstream as the golden file says, and reads that back unchanged.
func TestChatRequestRoundTrip(t *testing.T) {
	r, err := chatParseRequest(chatRead(t, "request_tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	chatSameRequest(t, r, chatWantTools())
	built, err := chatBuildRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(built) {
		t.Fatalf("built request is not JSON: %s", built)
	}
	chatGolden(t, "request_tools.built.json", built)
	back, err := chatParseRequest(built)
	if err != nil {
		t.Fatal(err)
	}
	chatSameRequest(t, back, r)
}

// TestChatParseRequestThinking reads the thinking conventions: details
// before text and calls, reasoning_content alone as unsigned thinking,
// Gemini's signature on a call, and the reasoning and format parameters.
func TestChatParseRequestThinking(t *testing.T) {
	body := `{"model":"m","messages":[
		{"role":"system","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
		{"role":"user","content":"hi"},
		{"role":"assistant","content":"Let me look.","reasoning_content":"ignored, details win",
		 "reasoning_details":[
			{"type":"reasoning.text","text":"think","signature":"sig1","format":"anthropic-claude-v1","index":0},
			{"type":"reasoning.encrypted","data":"opaque","format":"anthropic-claude-v1","index":1},
			{"type":"reasoning.encrypted","id":"rs_1","data":"enc","format":"openai-responses-v1","index":2},
			{"type":"reasoning.text","text":"other","signature":"gsig","format":"google-gemini-v1","index":3}],
		 "tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"},
			"extra_content":{"google":{"thought_signature":"ts"}}}]},
		{"role":"tool","tool_call_id":"c1","content":""},
		{"role":"user","content":"again"},
		{"role":"assistant","reasoning_content":"plain","content":""}],
		"thinking":{"type":"enabled","budget_tokens":3000},
		"response_format":{"type":"json_schema","json_schema":{"name":"out","schema":{"type":"object"},"strict":true}},
		"tool_choice":{"type":"function","function":{"name":"f"}},
		"stop":["x",""],"max_tokens":50,"max_completion_tokens":60,"top_k":40}`
	r, err := chatParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := &Request{
		Model:  "m",
		System: []string{"a\n\nb"},
		Messages: []Message{
			{Role: RoleUser, Parts: []Part{{Type: Text, Text: "hi"}}},
			{Role: RoleAssistant, Parts: []Part{
				{Type: Thinking, Text: "think", Signature: "sig1"},
				{Type: RedactedThinking, Data: "opaque"},
				{Type: ReasoningItem, ID: "rs_1", Data: "enc"},
				{Type: Thinking, Text: "other"},
				{Type: Text, Text: "Let me look."},
				{Type: ToolCall, ID: "c1", Name: "f", Arguments: "{}", Signature: "ts"},
			}},
			{Role: RoleUser, Parts: []Part{{Type: ToolResult, ID: "c1", Name: "f"}}},
			{Role: RoleUser, Parts: []Part{{Type: Text, Text: "again"}}},
			{Role: RoleAssistant, Parts: []Part{{Type: Thinking, Text: "plain"}}},
		},
		ToolChoice: &ToolChoice{Mode: ChoiceTool, Name: "f"},
		MaxTokens:  60,
		TopK:       json.RawMessage("40"),
		Stop:       []string{"x"},
		Format:     &Format{Type: "json_schema", Name: "out", Schema: json.RawMessage(`{"type":"object"}`), Strict: true},
		Reasoning:  &Reasoning{Budget: 3000},
	}
	chatSameRequest(t, r, want)
}

// TestChatParseRequestRefuses names what only chat can ask, leaving the
// target to the gateway.
func TestChatParseRequestRefuses(t *testing.T) {
	user := `"messages":[{"role":"user","content":"hi"}]`
	for feature, body := range map[string]string{
		"n other than 1":     `{` + user + `,"n":2}`,
		"logprobs":           `{` + user + `,"logprobs":true}`,
		"top_logprobs":       `{` + user + `,"top_logprobs":3}`,
		"audio output":       `{` + user + `,"modalities":["text","audio"]}`,
		"logit_bias":         `{` + user + `,"logit_bias":{"50256":-100}}`,
		"prediction":         `{` + user + `,"prediction":{"type":"content","content":"x"}}`,
		"web_search_options": `{` + user + `,"web_search_options":{}}`,
		"functions":          `{` + user + `,"functions":[{"name":"f"}]}`,
		"function_call":      `{` + user + `,"function_call":"auto"}`,
		"frequency_penalty":  `{` + user + `,"frequency_penalty":0.5}`,
		"presence_penalty":   `{` + user + `,"presence_penalty":-1e-3}`,
		"input_audio":        `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}]}`,
		"file content":       `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"f"}}]}]}`,
		"function role":      `{"messages":[{"role":"function","name":"f","content":"x"}]}`,
		"custom tools":       `{` + user + `,"tools":[{"type":"custom","custom":{"name":"x"}}]}`,
		"allowed_tools":      `{` + user + `,"tool_choice":{"type":"allowed_tools","allowed_tools":{}}}`,
	} {
		_, err := chatParseRequest([]byte(body))
		var u *Unsupported
		if !errors.As(err, &u) || !strings.Contains(u.Feature, feature) || u.Target != "" {
			t.Errorf("%s: got %v, want *Unsupported naming %q without target", body, err, feature)
		}
	}
	for _, body := range []string{
		`{` + user + `,"n":1,"logprobs":false,"top_logprobs":0,"logit_bias":{},"frequency_penalty":0,"presence_penalty":0.0,"seed":1,"store":false}`,
		`{` + user + `,"n":null,"modalities":["text"],"audio":null}`,
	} {
		if _, err := chatParseRequest([]byte(body)); err != nil {
			t.Errorf("%s: %v; defaults ask nothing", body, err)
		}
	}
}

// TestChatParseRequestInvalid names the field a malformed body gets wrong.
func TestChatParseRequestInvalid(t *testing.T) {
	msgs := `{"role":"user","content":"hi"},{"role":"assistant","content":"x"}`
	for field, body := range map[string]string{
		"body":                         `[]`,
		"messages":                     `{"messages":{}}`,
		"messages[1].role":             `{"messages":[{"role":"user","content":"x"},{"role":"wizard","content":"x"}]}`,
		"messages[0].role":             `{"messages":[{"content":"x"}]}`,
		"messages[2].tool_calls[0].id": `{"messages":[` + msgs + `,{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
		"messages[0].tool_calls[0].function.name": `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"arguments":"{}"}}]}]}`,
		"messages[0].tool_call_id":                `{"messages":[{"role":"tool","content":"x"}]}`,
		"messages[0].content":                     `{"messages":[{"role":"user","content":5}]}`,
		"messages[0].content[1].type":             `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"video"}]}]}`,
		"messages[0].content[0].type":             `{"messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x"}}]}]}`,
		"messages[0].content[0].image_url.url":    `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,abc"}}]}]}`,
		"max_tokens":                              `{"messages":[` + msgs + `],"max_tokens":-1}`,
		"max_completion_tokens":                   `{"messages":[` + msgs + `],"max_completion_tokens":"5"}`,
		"temperature":                             `{"messages":[` + msgs + `],"temperature":"hot"}`,
		"stop":                                    `{"messages":[` + msgs + `],"stop":[1]}`,
		"tool_choice":                             `{"messages":[` + msgs + `],"tool_choice":"sometimes"}`,
		"tools[0].function.name":                  `{"messages":[` + msgs + `],"tools":[{"type":"function","function":{}}]}`,
		"response_format.type":                    `{"messages":[` + msgs + `],"response_format":{"type":"xml"}}`,
		"reasoning_effort":                        `{"messages":[` + msgs + `],"reasoning_effort":"max"}`,
	} {
		_, err := chatParseRequest([]byte(body))
		var inv *Invalid
		if !errors.As(err, &inv) || inv.Field != field {
			t.Errorf("%s: got %v, want *Invalid of %s", body, err, field)
		}
	}
	if _, err := chatParseRequest([]byte(`{"messages":[]}`)); err == nil {
		t.Error("empty messages read")
	}
}

// TestChatParseRequestDeep: nesting past encoding/json's bound is an
// error, not a crash or a hang.
func TestChatParseRequestDeep(t *testing.T) {
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	for _, body := range []string{
		deep,
		`{"messages":` + deep + `}`,
		`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":` +
			strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001) + `}}]}`,
	} {
		if _, err := chatParseRequest([]byte(body)); err == nil {
			t.Errorf("a body %d bytes deep read without error", len(body))
		}
	}
}
