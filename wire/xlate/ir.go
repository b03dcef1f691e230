// Package xlate translates between the text APIs a caller may speak (chat
// completions, responses, messages) and those an upstream line may speak
// (chat completions, messages, Gemini's generateContent): the request, the
// JSON answer and the event stream, each through one neutral form (Request,
// Answer, Event) so that each wire format is read and written once.
//
// It is pure like package wire: the standard library and wire/units only.
// It never decides money: the charge is read from the upstream's answer in
// its own shape by package wire; the usage a translated answer shows the
// caller is mapped here, bucket by bucket, into the caller's convention.
//
// Every wire format lives in its own file: chat.go, messages.go,
// responses.go and gemini.go each register a codec (register) with what of
// the six directions that format needs.
package xlate

import "encoding/json"

// Shape is a wire format.
type Shape string

// The wire formats.
const (
	Chat      Shape = "chat"      // POST /v1/chat/completions
	Responses Shape = "responses" // POST /v1/responses
	Messages  Shape = "messages"  // POST /v1/messages
	Gemini    Shape = "gemini"    // POST /v1beta/models/{model}:generateContent / :streamGenerateContent?alt=sse
)

// Request is a text request in neutral form.
type Request struct {
	Model string
	// System holds the system and developer instructions, in order.
	System   []string
	Messages []Message
	Tools    []Tool
	// ToolChoice is nil when the caller named none.
	ToolChoice *ToolChoice
	// ParallelToolCalls is nil when the caller did not say.
	ParallelToolCalls *bool
	// MaxTokens is the output bound the caller gave in any of the three
	// fields (max_tokens, max_completion_tokens, max_output_tokens); 0: none.
	MaxTokens int64
	// Temperature, TopP and TopK are the numbers as the caller wrote them
	// (never parsed into floats); nil: not given.
	Temperature json.RawMessage
	TopP        json.RawMessage
	TopK        json.RawMessage
	Stop        []string
	// User is chat's user, responses' user (or safety_identifier) and
	// messages' metadata.user_id.
	User string
	// Metadata is an OpenAI-style metadata object of strings (chat,
	// responses); nil: none.
	Metadata map[string]string
	// Format is the structured output asked for; nil: free text.
	Format    *Format
	Reasoning *Reasoning
	Stream    bool
	// IncludeUsage: a chat caller's stream_options.include_usage. A
	// translated chat stream carries a usage chunk only when asked.
	IncludeUsage bool
}

// Role of a Message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one turn: RoleUser (text, images, tool results) or
// RoleAssistant (text, thinking, reasoning, tool calls). Chat's tool
// messages become ToolResult parts of a user message, consecutive ones
// merged into one.
type Message struct {
	Role  string
	Parts []Part
}

// PartType is what a Part holds.
type PartType uint8

// The part types.
const (
	Text PartType = iota + 1
	// Image: URL, or Data (base64) with MediaType.
	Image
	// ToolCall: ID, Name, Arguments (JSON text); Signature is Gemini's
	// thoughtSignature when the call carried one.
	ToolCall
	// ToolResult: ID (the call's), Name when known, Content (text and
	// image parts), IsError.
	ToolResult
	// Thinking: Text and Signature (Anthropic thinking; Gemini thought).
	Thinking
	// RedactedThinking: Data (Anthropic redacted_thinking).
	RedactedThinking
	// ReasoningItem: a Responses reasoning item: ID, Data (encrypted_content),
	// Text (its summary text, parts joined with blank lines).
	ReasoningItem
)

// Part is one piece of a message's content.
type Part struct {
	Type      PartType
	Text      string
	Signature string
	Data      string
	MediaType string
	URL       string
	ID        string
	Name      string
	Arguments string
	Content   []Part
	IsError   bool
}

// Tool is a function tool: its JSON Schema parameters as written.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // nil: none given
	Strict      bool
	// Custom marks a responses custom (freeform) tool, given to every
	// upstream as a function of one string parameter "input" (Parameters
	// says so, with the tool's grammar); its calls go back to a responses
	// caller as custom_tool_call items holding that input.
	Custom bool
}

// ToolChoice modes.
const (
	ChoiceAuto     = "auto"
	ChoiceNone     = "none"
	ChoiceRequired = "required" // Anthropic "any", Gemini ANY
	ChoiceTool     = "tool"     // Name must be called
)

// ToolChoice is which tool the model must or may call.
type ToolChoice struct {
	Mode string
	Name string
}

// Format is structured output: Type "json_schema" (Name, Schema, Strict)
// or "json_object".
type Format struct {
	Type   string
	Name   string
	Schema json.RawMessage
	Strict bool
}

// Reasoning is what the caller asked of the model's reasoning: an OpenAI
// effort ("minimal", "low", "medium", "high") or an Anthropic/Gemini token
// budget, whichever it gave; Off when it turned thinking off explicitly.
type Reasoning struct {
	Effort string
	Budget int64
	Off    bool
	// Summary is responses' reasoning.summary ("auto", "concise",
	// "detailed"), kept for a responses caller's own answer.
	Summary string
}

// Finish reasons, in neutral form.
const (
	FinishStop          = "stop"           // natural end (end_turn, STOP)
	FinishLength        = "length"         // the output bound (max_tokens, MAX_TOKENS)
	FinishToolCalls     = "tool_calls"     // stopped to call tools (tool_use)
	FinishStopSequence  = "stop_sequence"  // a stop sequence matched: Answer.StopSequence
	FinishContentFilter = "content_filter" // refused or filtered (refusal, SAFETY)
)

// Usage is the tokens of an answer, in the Anthropic convention: Input
// excludes the cache reads and writes; Output includes Reasoning.
type Usage struct {
	Input        int64
	CacheRead    int64
	CacheWrite5m int64
	CacheWrite1h int64
	Output       int64
	Reasoning    int64
}

// PromptTotal is every input token: the OpenAI and Gemini prompt count.
func (u Usage) PromptTotal() int64 { return u.Input + u.CacheRead + u.CacheWrite5m + u.CacheWrite1h }

// Answer is a whole (non-streamed) answer in neutral form.
type Answer struct {
	ID      string // the upstream's id; the caller's is made from it (CallerID)
	Model   string
	Created int64 // unix seconds; 0: unknown
	Parts   []Part
	Finish  string
	// StopSequence is the matched stop sequence (FinishStopSequence).
	StopSequence string
	Usage        Usage
	HasUsage     bool
}
