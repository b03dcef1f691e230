package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// The official SDKs, unmodified, run a tool loop through translation in
// every direction the gateway translates (translateEnv): the prompt
// scripts the sim's tool calls (sim:call lines), the SDK accumulates the
// streamed call, and the call goes back with its result on a second turn,
// which the upstream's sim accepts only when the id (or, for Gemini, the
// name) matches a call it made. Thinking and reasoning go back the same
// way, and the sim checks their signatures.

// sdkCall is one scripted tool call: the tool and its arguments.
type sdkCall struct{ name, args string }

// sdkScript is the calls the prompts script. The arguments nest objects
// and arrays and carry numbers, escapes and non-ASCII text, so a codec
// that cuts or re-encodes a streamed argument wrongly shows.
var sdkScript = []sdkCall{
	{"get_weather", `{"city":"Zürich","days":3,"units":{"temp":"C","wind":"km/h"},"note":"say \"hi\" ☀ \\ done"}`},
	{"get_time", `{"zone":"Europe/Zurich","formats":["iso","unix"],"h24":true,"offset":-1.5,"extra":null}`},
}

// sdkPrompt is a prompt scripting one call, or both at once (parallel),
// and the calls it scripts.
func sdkPrompt(parallel bool) (string, []sdkCall) {
	want := sdkScript[:1]
	if parallel {
		want = sdkScript
	}
	lines := []string{"Check the weather for me."}
	for _, c := range want {
		lines = append(lines, "sim:call "+c.name+" "+c.args)
	}
	if parallel {
		lines = append(lines, "sim:calls-parallel")
	}
	return strings.Join(lines, "\n"), want
}

// sdkSchemas is the JSON Schema of each tool's parameters.
var sdkSchemas = map[string]map[string]any{
	"get_weather": {"type": "object", "properties": map[string]any{
		"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"},
		"units": map[string]any{"type": "object"}, "note": map[string]any{"type": "string"}}},
	"get_time": {"type": "object", "properties": map[string]any{
		"zone": map[string]any{"type": "string"}, "formats": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"h24": map[string]any{"type": "boolean"}, "offset": map[string]any{"type": "number"}}},
}

// gotCall is one tool call as the SDK gave it, with its position in the
// answer: chat's tool call index, responses' output_index, messages'
// content block index.
type gotCall struct {
	id, name, args string
	index          int64
}

// checkCalls wants the scripted calls in order, the arguments equal as
// JSON, every id present and distinct, every index distinct.
func checkCalls(t *testing.T, got []gotCall, want []sdkCall) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d tool calls %+v, want %d", len(got), got, len(want))
	}
	ids, idx := map[string]bool{}, map[int64]bool{}
	for i, g := range got {
		if g.name != want[i].name || !sameJSON(g.args, want[i].args) {
			t.Errorf("call %d: %s(%s), want %s(%s)", i, g.name, g.args, want[i].name, want[i].args)
		}
		if g.id == "" || ids[g.id] || idx[g.index] {
			t.Errorf("call %d: id %q index %d: missing or repeated in %+v", i, g.id, g.index, got)
		}
		ids[g.id], idx[g.index] = true, true
	}
}

// sameIDs wants two runs of the same request to name their calls alike.
func sameIDs(t *testing.T, a, b []gotCall) {
	t.Helper()
	for i := range min(len(a), len(b)) {
		if a[i].id != b[i].id {
			t.Errorf("call %d: id %q streamed, %q as JSON: the ids are not stable", i, a[i].id, b[i].id)
		}
	}
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// toolOutput is the result the test sends back for a call.
func toolOutput(c gotCall) string { return `{"ok":true,"tool":"` + c.name + `"}` }

// checkFinalText wants the sim's usual reply: the loop is over.
func checkFinalText(t *testing.T, model, text string) {
	t.Helper()
	if !strings.HasPrefix(text, "Simulated reply from") || !strings.Contains(text, model) {
		t.Fatalf("final turn: %q, want the sim's reply from %s", text, model)
	}
}

var loopCases = []struct {
	name     string
	parallel bool
}{{"one", false}, {"parallel", true}}

// fatalSDK fails with err and, for an API error, the gateway's error body.
func fatalSDK(t *testing.T, err error) {
	t.Helper()
	var oe *openai.Error
	var ae *anthropic.Error
	switch {
	case errors.As(err, &oe):
		t.Fatalf("%v: %s", err, oe.RawJSON())
	case errors.As(err, &ae):
		t.Fatalf("%v: %s", err, ae.RawJSON())
	}
	t.Fatal(err)
}

// ---- chat completions (openai-go) ----

// TestTranslatedSDKChat: openai-go's chat completions tool loop, streamed
// through ChatCompletionAccumulator, against an anthropic and a gemini
// line, and as JSON against the anthropic line.
func TestTranslatedSDKChat(t *testing.T) {
	t.Parallel()
	e, _ := translateEnv(t)
	e.account("acme", "50")
	c := sdkClient(e, e.key("acme", "standard"))
	for _, model := range []string{"modela-opus-5-5", "modelf-flash"} {
		for _, lc := range loopCases {
			t.Run(model+"/"+lc.name, func(t *testing.T) {
				streamed := chatToolLoop(t, c, model, lc.parallel, true)
				if model == "modela-opus-5-5" {
					sameIDs(t, streamed, chatToolLoop(t, c, model, lc.parallel, false))
				}
			})
		}
	}
}

func chatTools() []openai.ChatCompletionToolUnionParam {
	var out []openai.ChatCompletionToolUnionParam
	for _, c := range sdkScript {
		out = append(out, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: c.name, Description: openai.String("Look up " + c.name), Parameters: sdkSchemas[c.name]}))
	}
	return out
}

// chatToolLoop runs the two turns and returns the first turn's calls.
func chatToolLoop(t *testing.T, c openai.Client, model string, parallel, stream bool) []gotCall {
	t.Helper()
	prompt, want := sdkPrompt(parallel)
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage(prompt)}
	params := openai.ChatCompletionNewParams{Model: model, Messages: msgs, Tools: chatTools(), MaxTokens: openai.Int(256)}
	msg, finish, calls := chatTurn(t, c, params, stream)
	if finish != "tool_calls" {
		t.Fatalf("finish %q, want tool_calls: %+v", finish, msg)
	}
	checkCalls(t, calls, want)
	params.Messages = append(msgs, msg.ToParam())
	for _, call := range calls {
		params.Messages = append(params.Messages, openai.ToolMessage(toolOutput(call), call.id))
	}
	msg, finish, more := chatTurn(t, c, params, stream)
	if finish != "stop" || len(more) != 0 {
		t.Fatalf("second turn: finish %q calls %+v", finish, more)
	}
	checkFinalText(t, model, msg.Content)
	return calls
}

// chatTurn makes one call and returns the message, its finish reason and
// its tool calls. Streamed, every chunk must be accepted by the
// accumulator (one completion id throughout) and a call's id, once given,
// must never change.
func chatTurn(t *testing.T, c openai.Client, params openai.ChatCompletionNewParams, stream bool) (openai.ChatCompletionMessage, string, []gotCall) {
	t.Helper()
	ctx := context.Background()
	var calls []gotCall
	if !stream {
		res, err := c.Chat.Completions.New(ctx, params)
		if err != nil {
			fatalSDK(t, err)
		}
		ch := res.Choices[0]
		for i, tc := range ch.Message.ToolCalls {
			calls = append(calls, gotCall{tc.ID, tc.Function.Name, tc.Function.Arguments, int64(i)})
		}
		return ch.Message, ch.FinishReason, calls
	}
	s := c.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	ids := map[int64]string{}
	var finished []openai.FinishedChatCompletionToolCall
	for s.Next() {
		ch := s.Current()
		if !acc.AddChunk(ch) {
			t.Fatalf("the accumulator refused chunk %s", ch.RawJSON())
		}
		for _, choice := range ch.Choices {
			for _, d := range choice.Delta.ToolCalls {
				old, seen := ids[d.Index]
				switch {
				case d.ID == "" && !seen:
					t.Fatalf("tool call %d starts without an id: %s", d.Index, ch.RawJSON())
				case d.ID != "" && seen && d.ID != old:
					t.Fatalf("tool call %d: id %q, then %q", d.Index, old, d.ID)
				case d.ID != "":
					ids[d.Index] = d.ID
				}
			}
		}
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
	}
	if err := s.Err(); err != nil {
		fatalSDK(t, err)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("%d choices", len(acc.Choices))
	}
	ch := acc.Choices[0]
	for _, tc := range ch.Message.ToolCalls {
		g := gotCall{id: tc.ID, name: tc.Function.Name, args: tc.Function.Arguments, index: -1}
		for i, id := range ids {
			if id == tc.ID {
				g.index = i
			}
		}
		calls = append(calls, g)
	}
	if len(finished) != len(calls) {
		t.Fatalf("the accumulator finished %d tool calls, the message has %d", len(finished), len(calls))
	}
	for i, f := range finished {
		if f.ID != calls[i].id || f.Name != calls[i].name || f.Arguments != calls[i].args || int64(f.Index) != calls[i].index {
			t.Fatalf("finished call %+v, message's %+v", f, calls[i])
		}
	}
	return ch.Message, ch.FinishReason, calls
}

// ---- responses (openai-go) ----

// TestTranslatedSDKResponses: openai-go's responses tool loop, streamed,
// against an openai-chat, an anthropic and a gemini line, and as JSON
// against the openai-chat line.
func TestTranslatedSDKResponses(t *testing.T) {
	t.Parallel()
	e, _ := translateEnv(t)
	e.account("acme", "50")
	c := sdkClient(e, e.key("acme", "standard"))
	for _, model := range []string{"modele-k3", "modela-opus-5-5", "modelf-flash"} {
		for _, lc := range loopCases {
			t.Run(model+"/"+lc.name, func(t *testing.T) {
				streamed, _, _ := responsesToolLoop(t, c, model, lc.parallel, true, false)
				if model == "modele-k3" {
					plain, _, _ := responsesToolLoop(t, c, model, lc.parallel, false, false)
					sameIDs(t, streamed, plain)
				}
			})
		}
	}
}

func responsesTools() []responses.ToolUnionParam {
	var out []responses.ToolUnionParam
	for _, c := range sdkScript {
		out = append(out, responses.ToolParamOfFunction(c.name, sdkSchemas[c.name], false))
	}
	return out
}

// responsesToolLoop runs the two turns, every output item of the first
// sent back as its param, and returns the first turn's calls and both
// answers. reasoning asks for reasoning with its encrypted content.
func responsesToolLoop(t *testing.T, c openai.Client, model string, parallel, stream, reasoning bool) ([]gotCall, *responses.Response, *responses.Response) {
	t.Helper()
	prompt, want := sdkPrompt(parallel)
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(prompt, responses.EasyInputMessageRoleUser)}
	params := responses.ResponseNewParams{
		Model: model, Instructions: openai.String("Be brief."), Tools: responsesTools(), MaxOutputTokens: openai.Int(4096),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
	}
	if reasoning {
		params.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffortMedium}
		params.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
		params.Store = openai.Bool(false)
	}
	res, calls := responsesTurn(t, c, params, stream)
	if res.Status != responses.ResponseStatusCompleted {
		t.Fatalf("status %q", res.Status)
	}
	checkCalls(t, calls, want)
	for _, it := range res.Output {
		switch it.Type {
		case "function_call":
			p := it.AsFunctionCall().ToParam()
			input = append(input, responses.ResponseInputItemUnionParam{OfFunctionCall: &p})
		case "reasoning":
			p := it.AsReasoning().ToParam()
			input = append(input, responses.ResponseInputItemUnionParam{OfReasoning: &p})
		case "message":
			p := it.AsMessage().ToParam()
			input = append(input, responses.ResponseInputItemUnionParam{OfOutputMessage: &p})
		default:
			t.Fatalf("output item of type %q: %s", it.Type, it.RawJSON())
		}
	}
	for _, call := range calls {
		out := responses.ResponseInputItemParamOfFunctionCallOutput(toolOutput(call))
		out.OfFunctionCallOutput.CallID = openai.String(call.id)
		input = append(input, out)
	}
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
	final, more := responsesTurn(t, c, params, stream)
	if len(more) != 0 {
		t.Fatalf("second turn called again: %+v", more)
	}
	checkFinalText(t, model, final.OutputText())
	return calls, res, final
}

// responsesTurn makes one call and returns the answer and its function
// calls (id: call_id). Streamed, each call's item must keep its call_id
// and name from output_item.added to response.completed, and its argument
// deltas must add up to the arguments of the done events and the answer.
func responsesTurn(t *testing.T, c openai.Client, params responses.ResponseNewParams, stream bool) (*responses.Response, []gotCall) {
	t.Helper()
	ctx := context.Background()
	var res *responses.Response
	if !stream {
		r, err := c.Responses.New(ctx, params)
		if err != nil {
			fatalSDK(t, err)
		}
		res = r
	} else {
		res = responsesStream(t, c, params)
	}
	var calls []gotCall
	for i, it := range res.Output {
		if it.Type == "function_call" {
			fc := it.AsFunctionCall()
			calls = append(calls, gotCall{fc.CallID, fc.Name, fc.Arguments, int64(i)})
		}
	}
	return res, calls
}

// streamedCall is a function call item as its events built it.
type streamedCall struct {
	callID, name string
	index        int64
	deltas       strings.Builder
	done         string
}

func responsesStream(t *testing.T, c openai.Client, params responses.ResponseNewParams) *responses.Response {
	t.Helper()
	s := c.Responses.NewStreaming(context.Background(), params)
	items := map[string]*streamedCall{}
	var res *responses.Response
	item := func(id string) *streamedCall {
		it := items[id]
		if it == nil {
			t.Fatalf("event for item %q before its output_item.added", id)
		}
		return it
	}
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.output_item.added":
			if fc := ev.Item.AsFunctionCall(); ev.Item.Type == "function_call" {
				if fc.ID == "" || fc.CallID == "" || items[fc.ID] != nil {
					t.Fatalf("function_call item added with id %q call_id %q", fc.ID, fc.CallID)
				}
				items[fc.ID] = &streamedCall{callID: fc.CallID, name: fc.Name, index: ev.OutputIndex}
			}
		case "response.function_call_arguments.delta":
			item(ev.ItemID).deltas.WriteString(ev.Delta)
		case "response.function_call_arguments.done":
			item(ev.ItemID).done = ev.Arguments
		case "response.output_item.done":
			if fc := ev.Item.AsFunctionCall(); ev.Item.Type == "function_call" {
				it := item(fc.ID)
				if fc.CallID != it.callID || fc.Name != it.name || ev.OutputIndex != it.index || fc.Arguments != it.deltas.String() || it.done != fc.Arguments {
					t.Fatalf("item %s done as %s %s(%s) at %d; added as %s %s at %d, deltas %s, arguments.done %s",
						fc.ID, fc.CallID, fc.Name, fc.Arguments, ev.OutputIndex, it.callID, it.name, it.index, it.deltas.String(), it.done)
				}
			}
		case "response.completed":
			r := ev.Response
			res = &r
		case "response.failed", "error":
			t.Fatalf("stream event %s", ev.RawJSON())
		}
	}
	if err := s.Err(); err != nil {
		fatalSDK(t, err)
	}
	if res == nil {
		t.Fatal("no response.completed")
	}
	n := 0
	for i, it := range res.Output {
		if it.Type != "function_call" {
			continue
		}
		n++
		fc := it.AsFunctionCall()
		if sc := items[fc.ID]; sc == nil || sc.callID != fc.CallID || sc.deltas.String() != fc.Arguments || sc.index != int64(i) {
			t.Fatalf("completed call %s (%s at %d) is not the one streamed: %+v", fc.ID, fc.CallID, i, sc)
		}
	}
	if n != len(items) {
		t.Fatalf("%d calls streamed, %d in the completed response", len(items), n)
	}
	return res
}

// ---- messages (anthropic-sdk-go) ----

// TestTranslatedSDKMessages: anthropic-sdk-go's messages tool loop,
// streamed through Message.Accumulate, against an openai-chat, a gemini
// and an openai line, and as JSON against the gemini line.
func TestTranslatedSDKMessages(t *testing.T) {
	t.Parallel()
	e, _ := translateEnv(t)
	e.account("acme", "50")
	ac := sdkAnthropic(e, e.key("acme", "standard"))
	for _, model := range []string{"modele-k3", "modelf-flash", "modelb-6-astra"} {
		for _, lc := range loopCases {
			t.Run(model+"/"+lc.name, func(t *testing.T) {
				streamed, _ := messagesToolLoop(t, ac, model, lc.parallel, true, false)
				if model == "modelf-flash" {
					plain, _ := messagesToolLoop(t, ac, model, lc.parallel, false, false)
					sameIDs(t, streamed, plain)
				}
			})
		}
	}
}

func sdkAnthropic(e *env, key string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(e.url), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
}

func messagesTools() []anthropic.ToolUnionParam {
	var out []anthropic.ToolUnionParam
	for _, c := range sdkScript {
		s := sdkSchemas[c.name]
		out = append(out, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name: c.name, Description: anthropic.String("Look up " + c.name),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: s["properties"]}}})
	}
	return out
}

// messagesToolLoop runs the two turns, the first answer sent back whole
// (Message.ToParam), and returns the first turn's calls and answer.
// thinking enables extended thinking.
func messagesToolLoop(t *testing.T, ac anthropic.Client, model string, parallel, stream, thinking bool) ([]gotCall, *anthropic.Message) {
	t.Helper()
	prompt, want := sdkPrompt(parallel)
	params := anthropic.MessageNewParams{
		Model: anthropic.Model(model), MaxTokens: 4096, Tools: messagesTools(),
		System:   []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
	}
	if thinking {
		params.Thinking = anthropic.ThinkingConfigParamOfEnabled(2048)
	}
	msg, calls := messagesTurn(t, ac, params, stream)
	if msg.StopReason != anthropic.StopReasonToolUse {
		t.Fatalf("stop reason %q, want tool_use", msg.StopReason)
	}
	checkCalls(t, calls, want)
	results := make([]anthropic.ContentBlockParamUnion, 0, len(calls))
	for _, call := range calls {
		results = append(results, anthropic.NewToolResultBlock(call.id, toolOutput(call), false))
	}
	params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(results...))
	final, more := messagesTurn(t, ac, params, stream)
	if final.StopReason != anthropic.StopReasonEndTurn || len(more) != 0 {
		t.Fatalf("second turn: stop %q calls %+v", final.StopReason, more)
	}
	var text strings.Builder
	for _, b := range final.Content {
		text.WriteString(b.Text)
	}
	checkFinalText(t, model, text.String())
	return calls, msg
}

// messagesTurn makes one call and returns the message and its tool_use
// blocks. Streamed, every event must accumulate, and each tool_use block
// must keep the id and name of its content_block_start, its input the
// input_json_deltas joined.
func messagesTurn(t *testing.T, ac anthropic.Client, params anthropic.MessageNewParams, stream bool) (*anthropic.Message, []gotCall) {
	t.Helper()
	ctx := context.Background()
	var msg anthropic.Message
	started := map[int64]anthropic.ContentBlockStartEventContentBlockUnion{}
	partial := map[int64]*strings.Builder{}
	if !stream {
		m, err := ac.Messages.New(ctx, params)
		if err != nil {
			fatalSDK(t, err)
		}
		msg = *m
	} else {
		s := ac.Messages.NewStreaming(ctx, params)
		for s.Next() {
			ev := s.Current()
			if err := msg.Accumulate(ev); err != nil {
				t.Fatalf("accumulate %s: %v", ev.RawJSON(), err)
			}
			switch ev.Type {
			case "content_block_start":
				started[ev.Index] = ev.ContentBlock
				partial[ev.Index] = &strings.Builder{}
			case "content_block_delta":
				if ev.Delta.Type == "input_json_delta" {
					partial[ev.Index].WriteString(ev.Delta.PartialJSON)
				}
			}
		}
		if err := s.Err(); err != nil {
			fatalSDK(t, err)
		}
	}
	var calls []gotCall
	for i, b := range msg.Content {
		if b.Type != "tool_use" {
			continue
		}
		calls = append(calls, gotCall{b.ID, b.Name, string(b.Input), int64(i)})
		if !stream {
			continue
		}
		st := started[int64(i)]
		if st.Type != "tool_use" || st.ID != b.ID || st.Name != b.Name || partial[int64(i)].String() != string(b.Input) {
			t.Fatalf("block %d: started as %s %s %s, deltas %s; accumulated %s %s %s", i, st.Type, st.ID, st.Name, partial[int64(i)].String(), b.ID, b.Name, b.Input)
		}
	}
	return &msg, calls
}

// ---- thinking and reasoning sent back ----

// TestTranslatedSDKThinking: the thinking an anthropic-sdk-go caller gets
// from a gemini and an openai-chat line, sent back whole with the tool
// result, is accepted; and the reasoning item an openai-go responses
// caller gets from an anthropic line, with its encrypted content, carries
// the thinking's signature there and back. The anthropic sim refuses a
// thinking block whose signature is not its own, and the translation
// keeps thinking on for the next turn only when the tool call's turn
// starts with signed thinking, so a second answer that thinks again shows
// the signature survived.
func TestTranslatedSDKThinking(t *testing.T) {
	t.Parallel()
	e, tees := translateEnv(t)
	e.account("acme", "50")
	key := e.key("acme", "standard")
	ac := sdkAnthropic(e, key)
	mode := map[bool]string{true: "/stream", false: "/json"}
	for _, model := range []string{"modelf-flash", "modele-k3"} {
		for _, stream := range []bool{true, false} {
			t.Run("messages/"+model+mode[stream], func(t *testing.T) {
				_, msg := messagesToolLoop(t, ac, model, false, stream, true)
				if len(msg.Content) == 0 || msg.Content[0].Type != "thinking" || msg.Content[0].Thinking == "" {
					t.Fatalf("the first answer does not start with thinking: %s", msg.RawJSON())
				}
			})
		}
	}
	c := sdkClient(e, key)
	for _, stream := range []bool{true, false} {
		t.Run("responses/modela-opus-5-5"+mode[stream], func(t *testing.T) {
			_, _, before := tees["anthropic"].answer()
			_, first, final := responsesToolLoop(t, c, "modela-opus-5-5", false, stream, true)
			if _, _, after := tees["anthropic"].answer(); after != before+2 {
				t.Fatalf("%d upstream calls, want 2", after-before)
			}
			for i, res := range []*responses.Response{first, final} {
				if len(res.Output) == 0 || res.Output[0].Type != "reasoning" || res.Output[0].AsReasoning().EncryptedContent == "" {
					t.Fatalf("answer %d does not start with a reasoning item with encrypted content: %s", i+1, res.RawJSON())
				}
			}
		})
	}
}
