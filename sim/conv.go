package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// # Round trips the sim checks
//
// As the providers do, the sim refuses (400, in the endpoint's error shape,
// the message naming the field) a conversation that sends back what it
// could not have answered:
//
//   - chat: a "tool" message whose tool_call_id is no id of the tool_calls
//     of an earlier message.
//   - messages: a tool_result block whose tool_use_id is no id of an
//     earlier tool_use block; a thinking block whose signature is not
//     Signature(model, its thinking text) ("Invalid `signature` in
//     `thinking` block"); and, with thinking {"type":"enabled"}, a last
//     assistant turn holding a tool_use whose first block is not thinking
//     or redacted_thinking (Anthropic's rule, its message word for word).
//     Adaptive thinking may skip thinking, so the last rule is not applied
//     to it.
//   - responses: a function_call_output (or custom_tool_call_output) whose
//     call_id is no call_id of an earlier function_call (custom_tool_call)
//     item — not checked with previous_response_id or conversation, nor
//     after a compaction or item_reference item, whose history the sim
//     cannot see; a reasoning item whose encrypted_content is not null and
//     does not start with "simenc_".
//   - Gemini: a functionResponse whose name is the name of no earlier
//     functionCall; a thoughtSignature that does not start with "simsig_";
//     and, with thinking on, a model content of the current turn (after
//     the last user content that is no function response) whose first
//     functionCall part has no thoughtSignature (Gemini 3's rule: the
//     sim signs the first call of every answer it thinks for).

// toolDef is one offered tool: chat {"type":"function","function":{"name"}},
// responses {"type":"function","name"}, messages {"name"} (client tools
// have no type or type "custom").
type toolDef struct {
	Type     string `json:"type"`
	Name     string `json:"name"`
	Function *struct {
		Name string `json:"name"`
	} `json:"function"`
}

// choiceNone reports whether a tool_choice forbids calls: "none" (chat,
// responses) or {"type":"none"} (messages).
func choiceNone(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case '"':
		var s string
		return json.Unmarshal(raw, &s) == nil && s == "none"
	case '{':
		var v struct {
			Type string `json:"type"`
		}
		return json.Unmarshal(raw, &v) == nil && v.Type == "none"
	}
	return false
}

// textsOf returns the text parts of a content.
func textsOf(c *content) []string {
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.parts))
	for i := range c.parts {
		if isText(c.parts[i].Type) {
			out = append(out, c.parts[i].Text)
		}
	}
	return out
}

func has(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// chatConvo reads a chat request's tool loop.
func chatConvo(req *chatRequest) convo {
	cv := convo{at: -1}
	if choiceNone(req.ToolChoice) {
		return cv
	}
	for _, t := range req.Tools {
		if t.Function != nil && t.Function.Name != "" && (t.Type == "function" || t.Type == "") {
			cv.offered = append(cv.offered, t.Function.Name)
		}
	}
	if len(cv.offered) == 0 {
		return cv
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		switch m := &req.Messages[i]; m.Role {
		case "tool":
			cv.done++
		case "user":
			cv.at, cv.texts = i, textsOf(&m.Content)
			return cv
		}
	}
	return cv
}

// checkChatTools refuses a tool message answering no earlier tool call.
func checkChatTools(msgs []chatMessage) error {
	var ids []string
	for i := range msgs {
		m := &msgs[i]
		for _, tc := range m.ToolCalls {
			ids = append(ids, tc.ID)
		}
		if m.Role == "tool" && !has(ids, m.ToolCallID) {
			return errors.New("messages[" + strconv.Itoa(i) + "].tool_call_id: " + strconv.Quote(m.ToolCallID) +
				" matches no tool call of an earlier message; messages with role 'tool' must be a response to a preceding message with 'tool_calls'")
		}
	}
	return nil
}

// messagesConvo reads a messages request's tool loop.
func messagesConvo(req *messagesRequest) convo {
	cv := convo{at: -1}
	if choiceNone(req.ToolChoice) {
		return cv
	}
	for _, t := range req.Tools {
		if t.Name != "" && (t.Type == "" || t.Type == "custom") {
			cv.offered = append(cv.offered, t.Name)
		}
	}
	if len(cv.offered) == 0 {
		return cv
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := &req.Messages[i]
		if m.Role != "user" {
			continue
		}
		n := 0
		for j := range m.Content.parts {
			if m.Content.parts[j].Type == "tool_result" {
				n++
			}
		}
		if n > 0 {
			cv.done += n
			continue
		}
		cv.at, cv.texts = i, textsOf(&m.Content)
		return cv
	}
	return cv
}

// thinkingMissing is Anthropic's message for a last assistant turn with
// a tool_use that does not start with thinking, when thinking is enabled.
const thinkingMissing = ".type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, " +
	"a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). " +
	"We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. " +
	"Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"

// checkMessagesTurns refuses tool results without their tool_use,
// thinking blocks the sim did not sign and, with thinking enabled, a last
// assistant tool_use turn that does not start with thinking.
func checkMessagesTurns(req *messagesRequest) error {
	var ids []string
	lastAssistant := -1
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.Role == "assistant" {
			lastAssistant = i
		}
		for j := range m.Content.parts {
			p := &m.Content.parts[j]
			at := "messages." + strconv.Itoa(i) + ".content." + strconv.Itoa(j)
			switch p.Type {
			case "tool_use":
				ids = append(ids, p.ID)
			case "tool_result":
				if !has(ids, p.ID) {
					return errors.New(at + ": unexpected `tool_use_id` found in `tool_result` blocks: " + p.ID +
						". Each `tool_result` block must have a corresponding `tool_use` block earlier in the conversation.")
				}
			case "thinking":
				if p.Signature != Signature(req.Model, p.Thinking) {
					return errors.New(at + ": Invalid `signature` in `thinking` block")
				}
			}
		}
	}
	if req.Thinking == nil || req.Thinking.Type != "enabled" || lastAssistant < 0 {
		return nil
	}
	parts := req.Messages[lastAssistant].Content.parts
	useAt := -1
	for j := range parts {
		if parts[j].Type == "tool_use" {
			useAt = j
		}
	}
	if useAt < 0 || parts[0].Type == "thinking" || parts[0].Type == "redacted_thinking" {
		return nil
	}
	return errors.New("messages." + strconv.Itoa(lastAssistant) + ".content.0" + strings.Replace(thinkingMissing, "%s", parts[0].Type, 1))
}

// responsesConvo reads a responses request's tool loop.
func responsesConvo(req *responsesRequest) convo {
	cv := convo{at: -1}
	if choiceNone(req.ToolChoice) {
		return cv
	}
	for _, t := range req.Tools {
		if t.Type == "function" && t.Name != "" {
			cv.offered = append(cv.offered, t.Name)
		}
	}
	if len(cv.offered) == 0 {
		return cv
	}
	in := req.Input
	if in.str {
		cv.at, cv.texts = 0, []string{in.text}
		return cv
	}
	for i := len(in.items) - 1; i >= 0; i-- {
		it := &in.items[i]
		switch {
		case it.Type == "function_call_output":
			cv.done++
		case it.hasContent && it.Role == "user":
			cv.at, cv.texts = i, textsOf(it.Content)
			return cv
		}
	}
	return cv
}

// checkResponsesItems refuses outputs of calls the input does not hold and
// reasoning items the sim did not encrypt.
func checkResponsesItems(req *responsesRequest) error {
	if req.Input.str {
		return nil
	}
	conv := bytes.TrimSpace(req.Conversation)
	check := req.PreviousResponseID == "" && (len(conv) == 0 || string(conv) == "null")
	var ids []string
	for i := range req.Input.items {
		it := &req.Input.items[i]
		at := "input[" + strconv.Itoa(i) + "]"
		switch it.Type {
		case "function_call", "custom_tool_call":
			ids = append(ids, it.callID)
		case "function_call_output", "custom_tool_call_output":
			if check && !has(ids, it.callID) {
				return errors.New(at + ".call_id: No tool call found for function call output with call_id " + it.callID + ".")
			}
		case "compaction", "item_reference":
			check = false
		case "reasoning":
			if it.encrypted != nil && !strings.HasPrefix(*it.encrypted, "simenc_") {
				item := ""
				if it.id != "" {
					item = " for item " + it.id
				}
				return errors.New(at + ".encrypted_content: The encrypted content" + item + " could not be verified.")
			}
		}
	}
	return nil
}
