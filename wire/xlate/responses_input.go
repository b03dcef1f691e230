package xlate

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
)

// respItemWire is one input item, of any type; which fields count
// depends on the type.
type respItemWire struct {
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ID               string          `json:"id"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Arguments        string          `json:"arguments"`
	Input            *string         `json:"input"`
	Output           json.RawMessage `json:"output"`
	Summary          json.RawMessage `json:"summary"`
	EncryptedContent string          `json:"encrypted_content"`
}

// respSummary is one part of a reasoning item's summary.
type respSummary struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// respContentWire is one content part of a message or of a function
// call's output.
type respContentWire struct {
	Type     string  `json:"type"`
	Text     string  `json:"text"`
	Refusal  string  `json:"refusal"`
	ImageURL *string `json:"image_url"`
	FileID   *string `json:"file_id"`
}

// respInput gathers the messages of an input: consecutive function call
// outputs become one user message of tool results, consecutive assistant
// items (messages, function calls, reasoning) one assistant message with
// its reasoning parts first, as they came.
type respInput struct {
	r         *Request
	reasoning []Part // of the assistant message being gathered
	assistant []Part
	results   []Part // of the user message of tool results being gathered
	names     map[string]string
}

func (in *respInput) flushAssistant() {
	if len(in.reasoning)+len(in.assistant) == 0 {
		return
	}
	parts := append(in.reasoning, in.assistant...)
	in.r.Messages = append(in.r.Messages, Message{Role: RoleAssistant, Parts: parts})
	in.reasoning, in.assistant = nil, nil
}

func (in *respInput) flushResults() {
	if len(in.results) == 0 {
		return
	}
	in.r.Messages = append(in.r.Messages, Message{Role: RoleUser, Parts: in.results})
	in.results = nil
}

// respParseInput reads input: a string (one user message) or an array of
// input items.
func respParseInput(raw json.RawMessage, r *Request) error {
	if raw[0] == '"' {
		var s string
		if err := respDecode(raw, &s, "input"); err != nil {
			return err
		}
		r.Messages = append(r.Messages, Message{Role: RoleUser, Parts: []Part{{Type: Text, Text: s}}})
		return nil
	}
	var items []json.RawMessage
	if err := respDecode(raw, &items, "input"); err != nil {
		return err
	}
	in := &respInput{r: r}
	for i, raw := range items {
		field := "input[" + strconv.Itoa(i) + "]"
		var it respItemWire
		if err := respDecode(raw, &it, field); err != nil {
			return err
		}
		if err := in.item(&it, field); err != nil {
			return err
		}
	}
	in.flushResults()
	in.flushAssistant()
	return nil
}

// item adds one input item.
func (in *respInput) item(it *respItemWire, field string) error {
	switch it.Type {
	case "message", "":
		if it.Type == "" && it.Role == "" {
			return &Invalid{Field: field + ".type", Msg: "required"}
		}
		return in.message(it, field)
	case "function_call", "custom_tool_call":
		return in.call(it, field)
	case "function_call_output", "custom_tool_call_output":
		return in.output(it, field)
	case "reasoning":
		parts, err := respReasoningParts(it, field)
		if err != nil {
			return err
		}
		in.flushResults()
		in.reasoning = append(in.reasoning, parts...)
		return nil
	case "item_reference":
		return &Unsupported{Feature: "item_reference"}
	}
	return &Unsupported{Feature: "the " + it.Type + " input item"}
}

// call adds a function call, or a custom tool's call as the function
// call it was made from (its input the one argument); a signature its
// call_id carries (callIDWithSig) is the call's again.
func (in *respInput) call(it *respItemWire, field string) error {
	if it.CallID == "" {
		return &Invalid{Field: field + ".call_id", Msg: "required"}
	}
	if it.Name == "" {
		return &Invalid{Field: field + ".name", Msg: "required"}
	}
	id, sig := splitCallID(it.CallID)
	args := respArguments(it.Arguments)
	if it.Type == "custom_tool_call" {
		if it.Input == nil {
			return &Invalid{Field: field + ".input", Msg: "required"}
		}
		args = respCustomArgs(*it.Input)
	}
	in.flushResults()
	in.assistant = append(in.assistant, Part{Type: ToolCall, ID: id, Name: it.Name, Arguments: args, Signature: sig})
	if in.names == nil {
		in.names = map[string]string{}
	}
	in.names[id] = it.Name
	return nil
}

// message adds a message item: system and developer ones to System, user
// and assistant ones as messages.
func (in *respInput) message(it *respItemWire, field string) error {
	switch it.Role {
	case "system", "developer":
		parts, err := respContent(it.Content, field+".content", false)
		if err != nil {
			return err
		}
		for _, p := range parts {
			in.r.System = append(in.r.System, p.Text)
		}
		return nil
	case RoleUser:
		parts, err := respContent(it.Content, field+".content", true)
		if err != nil {
			return err
		}
		in.flushResults()
		in.flushAssistant()
		in.r.Messages = append(in.r.Messages, Message{Role: RoleUser, Parts: parts})
		return nil
	case RoleAssistant:
		parts, err := respContent(it.Content, field+".content", false)
		if err != nil {
			return err
		}
		in.flushResults()
		in.assistant = append(in.assistant, parts...)
		return nil
	case "":
		return &Invalid{Field: field + ".role", Msg: "required"}
	}
	return &Invalid{Field: field + ".role", Msg: "must be user, assistant, system or developer"}
}

// output adds a function call's (or custom tool call's) output as a
// tool result.
func (in *respInput) output(it *respItemWire, field string) error {
	if it.CallID == "" {
		return &Invalid{Field: field + ".call_id", Msg: "required"}
	}
	if respAbsent(it.Output) {
		return &Invalid{Field: field + ".output", Msg: "required (a string or an array of content parts)"}
	}
	content, err := respContent(it.Output, field+".output", true)
	if err != nil {
		return err
	}
	in.flushAssistant()
	id, _ := splitCallID(it.CallID)
	in.results = append(in.results, Part{Type: ToolResult, ID: id, Name: in.names[id], Content: content})
	return nil
}

// respContent reads a content: a string (one text part) or an array of
// parts; images only where images is true (user messages and function
// call outputs), text only elsewhere.
func respContent(raw json.RawMessage, field string, images bool) ([]Part, error) {
	if respAbsent(raw) {
		return nil, &Invalid{Field: field, Msg: "required"}
	}
	if raw[0] == '"' {
		var s string
		if err := respDecode(raw, &s, field); err != nil {
			return nil, err
		}
		return []Part{{Type: Text, Text: s}}, nil
	}
	var raws []json.RawMessage
	if err := respDecode(raw, &raws, field); err != nil {
		return nil, err
	}
	parts := make([]Part, 0, len(raws))
	for j, raw := range raws {
		f := field + "[" + strconv.Itoa(j) + "]"
		var w respContentWire
		if err := respDecode(raw, &w, f); err != nil {
			return nil, err
		}
		p, err := respContentPart(&w, f, images)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// respContentPart reads one content part.
func respContentPart(w *respContentWire, field string, images bool) (Part, error) {
	switch w.Type {
	case "input_text", "output_text", "text":
		return Part{Type: Text, Text: w.Text}, nil
	case "refusal":
		return Part{Type: Text, Text: w.Refusal}, nil
	case "input_image":
		if !images {
			return Part{}, &Invalid{Field: field + ".type", Msg: "only a user message or a function call output holds an image"}
		}
		return respImage(w, field)
	case "input_file":
		return Part{}, &Unsupported{Feature: "input_file"}
	case "input_audio":
		return Part{}, &Unsupported{Feature: "audio input"}
	case "":
		return Part{}, &Invalid{Field: field + ".type", Msg: "required"}
	}
	return Part{}, &Invalid{Field: field + ".type", Msg: "unknown content type " + strconv.Quote(w.Type)}
}

// respImage reads an input_image: a URL, or a data: URL holding the image
// in base64.
func respImage(w *respContentWire, field string) (Part, error) {
	if w.ImageURL == nil || *w.ImageURL == "" {
		if w.FileID != nil && *w.FileID != "" {
			return Part{}, &Unsupported{Feature: "input_image by file_id"}
		}
		return Part{}, &Invalid{Field: field + ".image_url", Msg: "required"}
	}
	u := *w.ImageURL
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return Part{Type: Image, URL: u}, nil
	}
	media, data, ok := strings.Cut(rest, ";base64,")
	if !ok || media == "" || data == "" {
		return Part{}, &Invalid{Field: field + ".image_url", Msg: "a data: URL must be data:<media type>;base64,<data>"}
	}
	return Part{Type: Image, MediaType: media, Data: data}, nil
}

// respMRX is the prefix of the encrypted_content of a reasoning item the
// gateway made from thinking (respEncodeThinking): it is not encrypted but
// carries the thinking blocks and signatures back unchanged.
const respMRX = "mrx1."

// respThought is one thinking block inside an "mrx1." reasoning item:
// T "thinking" (X its text, S its signature) or "redacted" (D its data).
type respThought struct {
	T string `json:"t"`
	X string `json:"x,omitempty"`
	S string `json:"s,omitempty"`
	D string `json:"d,omitempty"`
}

// respReasoningParts reads a reasoning item: the thinking parts of an
// "mrx1." one, else one ReasoningItem part only an OpenAI line can read.
func respReasoningParts(it *respItemWire, field string) ([]Part, error) {
	enc, ok := strings.CutPrefix(it.EncryptedContent, respMRX)
	if !ok {
		var raws []json.RawMessage
		if err := respDecode(it.Summary, &raws, field+".summary"); err != nil {
			return nil, err
		}
		texts := make([]string, 0, len(raws))
		for j, raw := range raws {
			var s respSummary
			if err := respDecode(raw, &s, field+".summary["+strconv.Itoa(j)+"]"); err != nil {
				return nil, err
			}
			texts = append(texts, s.Text)
		}
		return []Part{{Type: ReasoningItem, ID: it.ID, Data: it.EncryptedContent, Text: strings.Join(texts, "\n\n")}}, nil
	}
	bad := &Invalid{Field: field + ".encrypted_content", Msg: "not the content of a reasoning item this gateway wrote"}
	js, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil, bad
	}
	var ts []respThought
	if err := json.Unmarshal(js, &ts); err != nil {
		return nil, bad
	}
	parts := make([]Part, 0, len(ts))
	for _, t := range ts {
		switch t.T {
		case "thinking":
			parts = append(parts, Part{Type: Thinking, Text: t.X, Signature: t.S})
		case "redacted":
			parts = append(parts, Part{Type: RedactedThinking, Data: t.D})
		default:
			return nil, bad
		}
	}
	return parts, nil
}
