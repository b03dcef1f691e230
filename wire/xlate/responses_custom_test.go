package xlate

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// A custom (freeform) tool as Codex offers apply_patch: a lark grammar.
const (
	respPatchGrammar = "start: begin_patch hunk+ end_patch\nbegin_patch: \"*** Begin Patch\" LF\nend_patch: \"*** End Patch\" LF?"
	respPatch        = "*** Begin Patch\n*** Add File: a.txt\n+say \"hi\"\\n\n*** End Patch\n"
)

// respCustomRequest is a responses request offering a function tool and
// Codex's custom apply_patch tool, after one custom call and its output.
func respCustomRequest(t *testing.T, choice string) *Request {
	t.Helper()
	tools := `[{"type":"function","name":"exec_command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}}}},` +
		`{"type":"custom","name":"apply_patch","description":"Edit files. This is a FREEFORM tool.","format":{"type":"grammar","syntax":"lark","definition":` +
		string(appendString(nil, respPatchGrammar)) + `}}]`
	input := `[{"type":"message","role":"user","content":[{"type":"input_text","text":"patch it"}]},` +
		`{"type":"custom_tool_call","id":"ctc_1","status":"completed","call_id":"call_p1","name":"apply_patch","input":` + string(appendString(nil, respPatch)) + `},` +
		`{"type":"custom_tool_call_output","call_id":"call_p1","output":"Success. Updated the following files:\nA a.txt\n"}]`
	body := `{"model":"m","stream":true,"tools":` + tools + `,"input":` + input
	if choice != "" {
		body += `,"tool_choice":` + choice
	}
	r, err := ParseRequest(Responses, []byte(body+`}`))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A custom tool is offered upstream as a function of one string parameter
// "input" that carries the grammar; a custom_tool_call item is the call of
// that function with its input as the argument, its output a tool result.
func TestRespParseCustomTool(t *testing.T) {
	r := respCustomRequest(t, `{"type":"custom","name":"apply_patch"}`)
	if len(r.Tools) != 2 || r.Tools[0].Custom || !r.Tools[1].Custom || r.Tools[1].Name != "apply_patch" ||
		r.Tools[1].Description != "Edit files. This is a FREEFORM tool." {
		t.Fatalf("tools = %+v", r.Tools)
	}
	var schema struct {
		Type       string
		Properties map[string]struct{ Type, Description string }
		Required   []string
	}
	if err := json.Unmarshal(r.Tools[1].Parameters, &schema); err != nil {
		t.Fatalf("parameters %s: %v", r.Tools[1].Parameters, err)
	}
	in := schema.Properties["input"]
	if schema.Type != "object" || len(schema.Properties) != 1 || in.Type != "string" ||
		!strings.HasSuffix(in.Description, "lark grammar exactly.\n"+respPatchGrammar) || !reflect.DeepEqual(schema.Required, []string{"input"}) {
		t.Errorf("parameters = %s", r.Tools[1].Parameters)
	}
	if r.ToolChoice == nil || *r.ToolChoice != (ToolChoice{Mode: ChoiceTool, Name: "apply_patch"}) {
		t.Errorf("tool_choice = %+v", r.ToolChoice)
	}
	args, _ := json.Marshal(map[string]string{"input": respPatch})
	want := []Message{
		{Role: RoleUser, Parts: []Part{respText("patch it")}},
		{Role: RoleAssistant, Parts: []Part{{Type: ToolCall, ID: "call_p1", Name: "apply_patch", Arguments: string(args)}}},
		{Role: RoleUser, Parts: []Part{{Type: ToolResult, ID: "call_p1", Name: "apply_patch",
			Content: []Part{respText("Success. Updated the following files:\nA a.txt\n")}}}},
	}
	if !reflect.DeepEqual(r.Messages, want) {
		t.Errorf("messages =\n%+v\nwant\n%+v", r.Messages, want)
	}
	// Every upstream gets it as a function tool.
	for _, to := range []Shape{Messages, Chat, Gemini} {
		body, err := BuildRequest(to, r)
		if err != nil || !strings.Contains(string(body), `"apply_patch"`) || !strings.Contains(string(body), `lark grammar exactly`) {
			t.Errorf("%s: %v %s", to, err, body)
		}
	}
	for _, bad := range []string{
		`[{"type":"custom_tool_call","call_id":"c","name":"apply_patch"}]`, // no input
		`[{"type":"custom_tool_call","name":"apply_patch","input":"x"}]`,   // no call_id
	} {
		var inv *Invalid
		if _, err := ParseRequest(Responses, []byte(`{"model":"m","input":`+bad+`}`)); !errors.As(err, &inv) {
			t.Errorf("%s: err %v, want Invalid", bad, err)
		}
	}
}

// respCustomAnswer is a messages upstream's answer calling both tools.
const respCustomAnswer = `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[` +
	`{"type":"text","text":"Patching."},` +
	`{"type":"tool_use","id":"toolu_p2","name":"apply_patch","input":{"input":"*** Begin Patch\n*** Delete File: a.txt\n*** End Patch\n"}},` +
	`{"type":"tool_use","id":"toolu_x","name":"exec_command","input":{"cmd":"ls"}}],` +
	`"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":20}}`

// A call of a custom tool goes back to the caller as a custom_tool_call
// item holding the input; a function's call stays a function_call.
func TestRespWriteAnswerCustomCall(t *testing.T) {
	r := respCustomRequest(t, "")
	out, err := TranslateAnswer(Messages, Responses, []byte(respCustomAnswer), r)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Output []map[string]any
		Tools  []map[string]any
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(resp.Output) != 3 {
		t.Fatalf("output = %s", out)
	}
	c, f := resp.Output[1], resp.Output[2]
	if c["type"] != "custom_tool_call" || c["call_id"] != "toolu_p2" || c["name"] != "apply_patch" ||
		c["input"] != "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch\n" || c["status"] != "completed" ||
		!strings.HasPrefix(c["id"].(string), "ctc_") || c["arguments"] != nil {
		t.Errorf("custom call item = %v", c)
	}
	if f["type"] != "function_call" || f["arguments"] != `{"cmd":"ls"}` || f["name"] != "exec_command" {
		t.Errorf("function call item = %v", f)
	}
	if len(resp.Tools) != 2 || resp.Tools[1]["type"] != "custom" || resp.Tools[1]["name"] != "apply_patch" {
		t.Errorf("echoed tools = %v", resp.Tools)
	}
	// Sent back, the item is the same call again.
	raw, _ := json.Marshal(c)
	back, err := ParseRequest(Responses, []byte(`{"model":"m","input":[`+string(raw)+`]}`))
	if err != nil || len(back.Messages) != 1 || back.Messages[0].Parts[0].Arguments != `{"input":"*** Begin Patch\n*** Delete File: a.txt\n*** End Patch\n"}` {
		t.Errorf("sent back: %v %+v", err, back)
	}
	// Arguments without the input are passed on as they are.
	if got := respCustomInput(`{"patch":"x"}`); got != `{"patch":"x"}` {
		t.Errorf("respCustomInput without input = %q", got)
	}
}

// Streamed, a custom tool's call is output_item.added (custom_tool_call,
// no input yet), the whole input as one custom_tool_call_input.delta, its
// .done and output_item.done — no function_call_arguments events — and the
// completed response holds the item.
func TestRespEncoderCustomCall(t *testing.T) {
	r := respCustomRequest(t, "")
	evs := []Event{
		{Kind: EvStart, ID: "msg_1", Model: "m"},
		{Kind: EvBlockStart, Block: 0, Part: ToolCall, ID: "toolu_p2", Name: "apply_patch"},
		{Kind: EvDelta, Block: 0, Text: `{"input":"*** Begin Patch\n*** Delete`},
		{Kind: EvDelta, Block: 0, Text: ` File: a.txt\n*** End Patch\n"}`},
		{Kind: EvBlockEnd, Block: 0},
		{Kind: EvBlockStart, Block: 1, Part: ToolCall, ID: "toolu_x", Name: "exec_command"},
		{Kind: EvDelta, Block: 1, Text: `{"cmd":"ls"}`},
		{Kind: EvBlockEnd, Block: 1},
		{Kind: EvFinish, Finish: FinishToolCalls},
	}
	const input = "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch\n"
	var names []string
	var done map[string]any
	for _, ev := range respReadSSE(t, respEncodeAll(r, evs, false)) {
		names = append(names, ev.name)
		var d struct {
			Delta, Input string
			ItemID       string `json:"item_id"`
			Item         map[string]any
			Response     struct{ Output []map[string]any }
		}
		if err := json.Unmarshal([]byte(ev.raw), &d); err != nil {
			t.Fatal(err)
		}
		switch ev.name {
		case "response.custom_tool_call_input.delta":
			if d.Delta != input || !strings.HasPrefix(d.ItemID, "ctc_") {
				t.Errorf("input delta %q item %q", d.Delta, d.ItemID)
			}
		case "response.custom_tool_call_input.done":
			if d.Input != input {
				t.Errorf("input done %q", d.Input)
			}
		case "response.output_item.added":
			if d.Item["name"] == "apply_patch" && (d.Item["type"] != "custom_tool_call" || d.Item["input"] != "") {
				t.Errorf("added %v", d.Item)
			}
		case "response.completed":
			done = d.Response.Output[0]
		}
	}
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.completed"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("events:\n%v\nwant\n%v", names, want)
	}
	if done["type"] != "custom_tool_call" || done["input"] != input || done["call_id"] != "toolu_p2" {
		t.Errorf("completed output[0] = %v", done)
	}
}
