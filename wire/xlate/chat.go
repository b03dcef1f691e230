package xlate

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// This file is the chat-completions format (POST /v1/chat/completions):
// its registration, the wire types its readers and writers share, and the
// helpers they use. A chat caller's request is read by chatParseRequest
// (chat_parse*.go), a chat upstream's request written by chatBuildRequest
// (chat_build.go), answers read and written in chat_answer.go, streams in
// chat_decode.go (with its hand-read fast path, chat_fastchunk.go and
// chat_scan.go) and chat_encode.go (with chat_json.go).

func init() {
	register(Chat, &codec{
		parseRequest: chatParseRequest,
		buildRequest: chatBuildRequest,
		parseAnswer:  chatParseAnswer,
		writeAnswer:  chatWriteAnswer,
		newDecoder:   chatNewDecoder,
		newEncoder:   chatNewEncoder,
	})
}

// chatNow is the created time of an answer or stream that has none.
func chatNow() int64 { return time.Now().Unix() }

// chatReasoningFormat is the format a reasoning_details entry carries for
// the thinking of the neutral form (Anthropic's, whose signatures it keeps).
const chatReasoningFormat = "anthropic-claude-v1"

// chatReasoningDetail is one entry of reasoning_details (the convention
// OpenRouter set for carrying signed and encrypted reasoning in chat).
type chatReasoningDetail struct {
	Type      string `json:"type"`
	ID        string `json:"id,omitempty"`
	Text      string `json:"text,omitempty"`
	Summary   string `json:"summary,omitempty"`
	Data      string `json:"data,omitempty"`
	Signature string `json:"signature,omitempty"`
	Format    string `json:"format,omitempty"`
	Index     int    `json:"index"`
}

// chatGoogle is a tool call's extra_content: Gemini's thought signature.
type chatGoogle struct {
	Google *struct {
		ThoughtSignature string `json:"thought_signature"`
	} `json:"google"`
}

func (g *chatGoogle) signature() string {
	if g == nil || g.Google == nil {
		return ""
	}
	return g.Google.ThoughtSignature
}

// chatToolCallWire is a tool call of an assistant message (request and
// answer) or of a stream delta (Index).
type chatToolCallWire struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
	ExtraContent *chatGoogle `json:"extra_content"`
}

// chatUsageWire is a chat usage object.
type chatUsageWire struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// chatMaxCount bounds every token count an upstream reports: no real count
// comes near it, and sums of a few such counts cannot overflow an int64.
const chatMaxCount = 1 << 53

// usage is w in the neutral convention: Input excludes the cached tokens,
// Output includes the reasoning ones. A negative or absurd count, or
// cached above prompt (as package wire, which charges it, reads it), is
// malformed; reasoning above completion, which servers that count thoughts
// apart report, is kept as given.
func (w *chatUsageWire) usage() (Usage, error) {
	var cached, reasoning int64
	if w.PromptTokensDetails != nil {
		cached = w.PromptTokensDetails.CachedTokens
	}
	if w.CompletionTokensDetails != nil {
		reasoning = w.CompletionTokensDetails.ReasoningTokens
	}
	for _, c := range [...]struct {
		name string
		n    int64
	}{
		{"prompt_tokens", w.PromptTokens}, {"completion_tokens", w.CompletionTokens},
		{"prompt_tokens_details.cached_tokens", cached}, {"completion_tokens_details.reasoning_tokens", reasoning},
	} {
		if c.n < 0 || c.n > chatMaxCount {
			return Usage{}, malformed("usage.%s is out of range", c.name)
		}
	}
	if cached > w.PromptTokens {
		return Usage{}, malformed("usage.prompt_tokens_details.cached_tokens is above usage.prompt_tokens")
	}
	return Usage{
		Input:     w.PromptTokens - cached,
		CacheRead: cached,
		Output:    w.CompletionTokens,
		Reasoning: reasoning,
	}, nil
}

// chatFinishIn is a chat finish_reason in neutral form; hasCalls says the
// answer holds tool calls. A "stop" (OpenAI's when tool_choice named the
// function, Gemini's compatible API's always), a missing or a server's own
// reason with calls is tool_calls: the model stopped to have them run, and
// a messages caller acts on tool_use, not end_turn.
func chatFinishIn(reason string, hasCalls bool) string {
	switch reason {
	case "length":
		return FinishLength
	case "tool_calls", "function_call":
		return FinishToolCalls
	case "content_filter":
		return FinishContentFilter
	}
	if hasCalls {
		return FinishToolCalls
	}
	return FinishStop
}

// chatFinishOut is a neutral finish reason as chat's finish_reason.
func chatFinishOut(f string) string {
	switch f {
	case FinishLength, FinishToolCalls, FinishContentFilter:
		return f
	}
	return "stop"
}

// chatDetailParts are the parts reasoning_details stands for: Anthropic's
// (or unmarked) text and encrypted entries become Thinking (signed) and
// RedactedThinking; OpenAI's encrypted entries a ReasoningItem; another
// vendor's text becomes Thinking without its signature, which no other
// vendor could check; summaries Thinking; other vendors' encrypted entries
// and unknown types are left out.
func chatDetailParts(details []chatReasoningDetail) []Part {
	var parts []Part
	for _, d := range details {
		ours := d.Format == "" || d.Format == chatReasoningFormat
		switch {
		case d.Type == "reasoning.text":
			p := Part{Type: Thinking, Text: d.Text}
			if ours {
				p.Signature = d.Signature
			}
			parts = append(parts, p)
		case d.Type == "reasoning.summary":
			parts = append(parts, Part{Type: Thinking, Text: d.Summary})
		case d.Type == "reasoning.encrypted" && ours:
			parts = append(parts, Part{Type: RedactedThinking, Data: d.Data})
		case d.Type == "reasoning.encrypted" && d.Format == "openai-responses-v1":
			parts = append(parts, Part{Type: ReasoningItem, ID: d.ID, Data: d.Data})
		}
	}
	return parts
}

// chatThinkingOut is the reasoning_content and reasoning_details that the
// Thinking and RedactedThinking parts among parts stand for.
func chatThinkingOut(parts []Part) (content string, details []chatReasoningDetail) {
	var texts []string
	for _, p := range parts {
		switch p.Type {
		case Thinking:
			texts = append(texts, p.Text)
			details = append(details, chatReasoningDetail{
				Type: "reasoning.text", Text: p.Text, Signature: p.Signature,
				Format: chatReasoningFormat, Index: len(details),
			})
		case RedactedThinking:
			details = append(details, chatReasoningDetail{
				Type: "reasoning.encrypted", Data: p.Data,
				Format: chatReasoningFormat, Index: len(details),
			})
		}
	}
	return strings.Join(texts, "\n\n"), details
}

// chatMarshal is json.Marshal without HTML escaping (the stream encoder
// escapes only what JSON requires, and the two should agree).
func chatMarshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// chatIsNull reports whether raw is absent or JSON null.
func chatIsNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// chatIsNumber reports whether raw is a JSON number (and not a string,
// null or anything else).
func chatIsNumber(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') && json.Valid(raw)
}

// chatIsZero reports whether raw is a JSON number equal to zero ("0",
// "-0.0", "0e5"), read without floats.
func chatIsZero(raw json.RawMessage) bool {
	if !chatIsNumber(raw) {
		return false
	}
	mant := strings.TrimPrefix(string(bytes.TrimSpace(raw)), "-")
	if i := strings.IndexAny(mant, "eE"); i >= 0 {
		mant = mant[:i]
	}
	return strings.Trim(mant, "0.") == ""
}

// chatInvalid is err, from decoding the value at path, as an *Invalid
// naming the field. Its message says which JSON type was found and which
// was wanted, never the value.
func chatInvalid(path string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := path
		if te.Field != "" {
			if field != "" {
				field += "."
			}
			field += te.Field
		}
		if field == "" {
			field = "body"
		}
		got, _, _ := strings.Cut(te.Value, " ")
		return &Invalid{Field: field, Msg: "is " + got + ", want " + chatJSONType(te.Type.Kind().String())}
	}
	if path == "" {
		path = "body"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &Invalid{Field: path, Msg: "is not valid JSON"}
	}
	return &Invalid{Field: path, Msg: "cannot be read: " + err.Error()}
}

// chatJSONType names the JSON type a Go kind is decoded from.
func chatJSONType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "uint", "uint64":
		return "an integer"
	case "float64", "float32":
		return "a number"
	case "slice", "array":
		return "an array"
	}
	return "an object"
}

// chatDecode decodes raw into v; an error names path.
func chatDecode(raw json.RawMessage, path string, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return chatInvalid(path, err)
	}
	return nil
}
