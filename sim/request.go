package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// # What the sim accepts
//
// It validates no more strictly than the providers: what it does not read
// passes. Messages: a message role is "user", "assistant" or "system"
// (Claude Code puts system turns inside messages; they count as any other
// turn); blocks of any type (thinking, tool_use, tool_result, image,
// document, …) with cache_control on any of them; tools with any fields
// (defer_loading, cache_control, server tools), thinking,
// context_management, output_config, metadata and unknown top-level or
// per-message fields. cache_control is checked as upstream checks it (type
// "ephemeral", ttl "5m" or "1h"). Responses: items of any type and role
// (developer messages, reasoning items with content null, function calls
// and outputs, compaction items, unknown fields such as store, include,
// prompt_cache_key, client_metadata). Of tools, tool_choice, thinking and
// reasoning it reads what the tool loop and thinking need (turn.go), and
// of tool calls and results the ids that tie them (conv.go says what it
// refuses).

// content is a message content: a string, an array of content parts, or
// null. A string becomes one text part with str set.
type content struct {
	parts []part
}

var errContent = errors.New("content must be a string, an array of content parts or null")

func (c *content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return errContent
	}
	switch b[0] {
	case 'n':
		c.parts = nil
		return nil
	case '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		c.parts = []part{{Type: "text", Text: s, str: true}}
		return nil
	case '[':
		return json.Unmarshal(b, &c.parts)
	}
	return errContent
}

// part is one content part or block. Non-text parts keep their raw JSON
// (for prompt-cache identity); they count a flat PartTokens.
type part struct {
	Type         string
	Text         string
	CacheControl *cacheControl
	str          bool
	raw          []byte
	// ID is a tool_use block's id or a tool_result block's tool_use_id;
	// Thinking and Signature are a thinking block's.
	ID        string
	Thinking  string
	Signature string
}

// cacheControl is an Anthropic prompt-cache breakpoint.
type cacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl"`
}

var errPart = errors.New("each content part must be a JSON object")

func (p *part) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errPart
	}
	var v struct {
		Type         string        `json:"type"`
		Text         string        `json:"text"`
		CacheControl *cacheControl `json:"cache_control"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	p.Type, p.Text, p.CacheControl = v.Type, v.Text, v.CacheControl
	if !isText(v.Type) {
		p.raw = append([]byte(nil), b...)
	}
	switch v.Type {
	case "tool_use", "tool_result", "thinking":
		var x struct {
			ID        string `json:"id"`
			ToolUseID string `json:"tool_use_id"`
			Thinking  string `json:"thinking"`
			Signature string `json:"signature"`
		}
		if err := json.Unmarshal(b, &x); err != nil {
			return err
		}
		p.ID, p.Thinking, p.Signature = x.ID, x.Thinking, x.Signature
		if v.Type == "tool_result" {
			p.ID = x.ToolUseID
		}
	}
	return nil
}

// isText reports whether a part type carries countable text.
func isText(typ string) bool {
	return typ == "text" || typ == "input_text" || typ == "output_text"
}

// chatRequest is the part of a chat completion request the sim reads.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	PromptCacheKey      string          `json:"prompt_cache_key"`
	ReasoningEffort     string          `json:"reasoning_effort"`
	Tools               []toolDef       `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
}

type chatMessage struct {
	Role    string  `json:"role"`
	Content content `json:"content"`
	// ToolCalls (chat assistant messages) and ToolCallID (chat tool
	// messages) tie tool results to their calls.
	ToolCalls []struct {
		ID string `json:"id"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

// responsesRequest is the part of a responses request the sim reads.
type responsesRequest struct {
	Model           string     `json:"model"`
	Input           *respInput `json:"input"`
	Instructions    *string    `json:"instructions"`
	Stream          bool       `json:"stream"`
	MaxOutputTokens *int64     `json:"max_output_tokens"`
	PromptCacheKey  string     `json:"prompt_cache_key"`
	Reasoning       *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Include            []string        `json:"include"`
	Tools              []toolDef       `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	PreviousResponseID string          `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
}

// includes reports whether the request's include names what.
func (r *responsesRequest) includes(what string) bool {
	for _, s := range r.Include {
		if s == what {
			return true
		}
	}
	return false
}

// thinkWords is the reasoning words the request asks for.
func (r *responsesRequest) thinkWords() int {
	if r.Reasoning == nil {
		return 0
	}
	return effortWords(r.Reasoning.Effort)
}

// respInput is a responses `input`: a string or an array of items.
type respInput struct {
	str   bool
	text  string
	items []respItem
}

var errInput = errors.New("input must be a string or an array of input items")

func (in *respInput) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return errInput
	}
	switch b[0] {
	case '"':
		in.str = true
		return json.Unmarshal(b, &in.text)
	case '[':
		return json.Unmarshal(b, &in.items)
	}
	return errInput
}

// respItem is one input item. Items with content are messages; other items
// (function calls, their outputs, …) count by the size of their raw JSON.
type respItem struct {
	Type       string
	Role       string
	Content    *content
	rawLen     int
	rawHash    uint64 // FNV-1a of the raw JSON of an item without content
	hasContent bool
	// id, callID and encrypted are read from calls, call outputs and
	// reasoning items only.
	id, callID string
	encrypted  *string
}

var errItem = errors.New("each input item must be a JSON object")

func (it *respItem) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errItem
	}
	var v struct {
		Type    string   `json:"type"`
		Role    string   `json:"role"`
		Content *content `json:"content"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	it.Type, it.Role, it.Content, it.rawLen = v.Type, v.Role, v.Content, len(b)
	it.hasContent = v.Content != nil
	if !it.hasContent {
		it.rawHash = fnvBytes(fnvOffset, b)
	}
	switch v.Type {
	case "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output", "reasoning":
		var x struct {
			ID        string  `json:"id"`
			CallID    string  `json:"call_id"`
			Encrypted *string `json:"encrypted_content"`
		}
		if err := json.Unmarshal(b, &x); err != nil {
			return err
		}
		it.id, it.callID, it.encrypted = x.ID, x.CallID, x.Encrypted
	}
	return nil
}

// messagesRequest is the part of a messages request the sim reads.
type messagesRequest struct {
	Model      string          `json:"model"`
	MaxTokens  *int64          `json:"max_tokens"`
	System     *content        `json:"system"`
	Messages   []chatMessage   `json:"messages"`
	Stream     bool            `json:"stream"`
	Tools      []toolDef       `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Thinking   *struct {
		Type         string `json:"type"`
		BudgetTokens int64  `json:"budget_tokens"`
		Display      string `json:"display"`
	} `json:"thinking"`
	OutputConfig *struct {
		Effort string `json:"effort"`
	} `json:"output_config"`
}

// thinkWords is the reasoning words the request asks for: enabled by its
// budget, adaptive by output_config.effort (high when absent).
func (r *messagesRequest) thinkWords() int {
	if r.Thinking == nil {
		return 0
	}
	switch r.Thinking.Type {
	case "enabled":
		return budgetWords(r.Thinking.BudgetTokens)
	case "adaptive":
		effort := "high"
		if r.OutputConfig != nil && r.OutputConfig.Effort != "" {
			effort = r.OutputConfig.Effort
		}
		return effortWords(effort)
	}
	return 0
}

// limitField checks an optional max-tokens field: absent is no cap,
// present must be at least 1.
func limitField(name string, v *int64) (int64, error) {
	if v == nil {
		return 0, nil
	}
	if *v < 1 {
		return 0, errors.New("`" + name + "` must be at least 1, got " + strconv.FormatInt(*v, 10))
	}
	return *v, nil
}

// parseChat decodes and validates a chat completion request. A model error
// is returned as errModel so the caller can answer 404.
func parseChat(body []byte) (*chatRequest, error) {
	var req chatRequest
	if err := decodeModel(body, &req, famChat, "`model` is required"); err != nil {
		return &req, err
	}
	if len(req.Messages) == 0 {
		return nil, errors.New("`messages` must be a non-empty array")
	}
	for i := range req.Messages {
		if req.Messages[i].Role == "" {
			return nil, errors.New("`messages[" + strconv.Itoa(i) + "].role` is required")
		}
	}
	if _, err := limitField("max_tokens", req.MaxTokens); err != nil {
		return nil, err
	}
	if _, err := limitField("max_completion_tokens", req.MaxCompletionTokens); err != nil {
		return nil, err
	}
	if err := checkChatTools(req.Messages); err != nil {
		return nil, err
	}
	return &req, nil
}

// parseResponses decodes and validates a responses request.
func parseResponses(body []byte) (*responsesRequest, error) {
	var req responsesRequest
	if err := decodeModel(body, &req, famResponses, "`model` is required"); err != nil {
		return &req, err
	}
	if req.Input == nil {
		return nil, errors.New("`input` is required")
	}
	if _, err := limitField("max_output_tokens", req.MaxOutputTokens); err != nil {
		return nil, err
	}
	if err := checkResponsesItems(&req); err != nil {
		return nil, err
	}
	return &req, nil
}

// parseMessages decodes and validates a messages request (the version
// header is checked by the handler).
func parseMessages(body []byte) (*messagesRequest, error) {
	var req messagesRequest
	if err := decodeModel(body, &req, famMessages, "model: Field required"); err != nil {
		return &req, err
	}
	if req.MaxTokens == nil {
		return nil, errors.New("max_tokens: Field required")
	}
	if *req.MaxTokens < 1 {
		return nil, errors.New("max_tokens: must be at least 1, got " + strconv.FormatInt(*req.MaxTokens, 10))
	}
	if err := checkMessages(&req); err != nil {
		return nil, err
	}
	if err := checkMessagesTurns(&req); err != nil {
		return nil, err
	}
	return &req, nil
}

// messageRoles are the roles a messages turn may have: current clients
// (Claude Code) put system turns inside messages, and the provider takes
// them.
var messageRoles = map[string]bool{"user": true, "assistant": true, "system": true}

// checkMessages validates what a messages request and a count_tokens
// request share: at least one message, each with a known role, and
// well-formed cache_control on every block. Everything else (tools,
// thinking, context_management, output_config, metadata, unknown fields)
// passes unread.
func checkMessages(req *messagesRequest) error {
	if len(req.Messages) == 0 {
		return errors.New("messages: must contain at least one message")
	}
	for i := range req.Messages {
		if !messageRoles[req.Messages[i].Role] {
			return errors.New("messages." + strconv.Itoa(i) + ".role: must be \"user\", \"assistant\" or \"system\"")
		}
	}
	if err := checkCacheControl("system", req.System); err != nil {
		return err
	}
	for i := range req.Messages {
		if err := checkCacheControl("messages."+strconv.Itoa(i)+".content", &req.Messages[i].Content); err != nil {
			return err
		}
	}
	return nil
}

// parseCountTokens decodes and validates a count_tokens request: a
// messages request without max_tokens.
func parseCountTokens(body []byte) (*messagesRequest, error) {
	var req messagesRequest
	if err := decodeModel(body, &req, famMessages, "model: Field required"); err != nil {
		return &req, err
	}
	if err := checkMessages(&req); err != nil {
		return nil, err
	}
	return &req, nil
}

// compactRequest is the part of a responses compact request the sim reads.
// input is optional upstream (previous_response_id may name the
// conversation instead); the sim keeps no conversations, so without input
// it compacts the instructions alone.
type compactRequest struct {
	Model        string     `json:"model"`
	Input        *respInput `json:"input"`
	Instructions *string    `json:"instructions"`
}

// parseCompact decodes and validates a responses compact request.
func parseCompact(body []byte) (*compactRequest, error) {
	var req compactRequest
	if err := decodeModel(body, &req, famResponses, "`model` is required"); err != nil {
		return &req, err
	}
	return &req, nil
}

// checkCacheControl validates the cache_control of every part of c.
func checkCacheControl(where string, c *content) error {
	if c == nil {
		return nil
	}
	for j, p := range c.parts {
		cc := p.CacheControl
		if cc == nil {
			continue
		}
		at := where + "." + strconv.Itoa(j) + ".cache_control"
		if cc.Type != "ephemeral" {
			return errors.New(at + ".type: must be \"ephemeral\"")
		}
		if cc.TTL != "" && cc.TTL != "5m" && cc.TTL != "1h" {
			return errors.New(at + ".ttl: must be \"5m\" or \"1h\"")
		}
	}
	return nil
}

// compactionTrigger reports whether a responses input asks for a
// compaction: an item of type compaction_trigger, as Codex CLI sends it
// (remote compaction v2) instead of calling /v1/responses/compact.
func (in *respInput) compactionTrigger() bool {
	for i := range in.items {
		if in.items[i].Type == "compaction_trigger" {
			return true
		}
	}
	return false
}

// errModel marks a request whose model the endpoint does not serve.
var errModel = errors.New("model not served")

// decodeModel decodes body into req and checks the model it names: none is
// an error saying missing (each API words it its own way), one that f does
// not serve is errModel, so that the caller can answer 404 with the name.
func decodeModel(body []byte, req interface{ model() string }, f family, missing string) error {
	if err := decodeJSON(body, req); err != nil {
		return err
	}
	if req.model() == "" {
		return errors.New(missing)
	}
	if !serves(req.model(), f) {
		return errModel
	}
	return nil
}
