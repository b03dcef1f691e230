package xlate

import (
	"encoding/json"
	"errors"
	"math"
	"net/url"
)

// Gemini's generateContent is an upstream's format only: its requests are
// written (gemini_request.go), its answers and alt=sse streams read
// (gemini_answer.go, gemini_stream.go). A caller never speaks it here.
func init() {
	register(Gemini, &codec{
		buildRequest: gemBuildRequest,
		parseAnswer:  gemParseAnswer,
		newDecoder:   func() Decoder { return &gemDecoder{} },
	})
}

// GeminiPath is the path and query of a Gemini generateContent call for
// model: ":generateContent", or ":streamGenerateContent" with "alt=sse"
// (server-sent events, one GenerateContentResponse per event) when stream.
func GeminiPath(model string, stream bool) (path, rawQuery string) {
	p := "/v1beta/models/" + url.PathEscape(model)
	if stream {
		return p + ":streamGenerateContent", "alt=sse"
	}
	return p + ":generateContent", ""
}

// gemResponseWire is a GenerateContentResponse: a whole answer, or one
// chunk of a stream. Only the first candidate is read (the request never
// asks for more).
type gemResponseWire struct {
	Candidates     []gemCandidateWire `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *gemUsageWire `json:"usageMetadata"`
	ResponseID    string        `json:"responseId"`
	ModelVersion  string        `json:"modelVersion"`
	// Error is Google's error object, in an error body or a stream chunk.
	Error *struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	} `json:"error"`
}

type gemCandidateWire struct {
	Content *struct {
		Parts []gemPartWire `json:"parts"`
	} `json:"content"`
	FinishReason string `json:"finishReason"`
}

// gemPartWire is one part of an answer's content. Text is nil when the
// part has none (a functionCall, or a kind this package does not read).
type gemPartWire struct {
	Text             *string `json:"text"`
	Thought          bool    `json:"thought"`
	ThoughtSignature string  `json:"thoughtSignature"`
	FunctionCall     *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
}

// gemUsageWire is usageMetadata. totalTokenCount is their sum and not read.
type gemUsageWire struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
}

// usage is w in neutral form: Input is the prompt without its cached part,
// plus toolUsePromptTokenCount (the results of Google's own tools fed back
// as input, outside promptTokenCount: Google documents totalTokenCount as
// prompt + candidates + toolUsePrompt + thoughts); Output is candidates
// plus thoughts, of which Reasoning is the thoughts.
func (w *gemUsageWire) usage() (Usage, error) {
	for _, f := range [...]struct {
		name string
		n    int64
	}{
		{"promptTokenCount", w.PromptTokenCount},
		{"cachedContentTokenCount", w.CachedContentTokenCount},
		{"candidatesTokenCount", w.CandidatesTokenCount},
		{"thoughtsTokenCount", w.ThoughtsTokenCount},
		{"toolUsePromptTokenCount", w.ToolUsePromptTokenCount},
	} {
		if f.n < 0 {
			return Usage{}, malformed("usageMetadata.%s is negative (%d)", f.name, f.n)
		}
	}
	if w.CachedContentTokenCount > w.PromptTokenCount {
		return Usage{}, malformed("usageMetadata.cachedContentTokenCount (%d) is above usageMetadata.promptTokenCount (%d)",
			w.CachedContentTokenCount, w.PromptTokenCount)
	}
	input := w.PromptTokenCount - w.CachedContentTokenCount
	if w.ToolUsePromptTokenCount > math.MaxInt64-input {
		return Usage{}, malformed("usageMetadata.toolUsePromptTokenCount (%d) overflows the input count", w.ToolUsePromptTokenCount)
	}
	if w.ThoughtsTokenCount > math.MaxInt64-w.CandidatesTokenCount {
		return Usage{}, malformed("usageMetadata.thoughtsTokenCount (%d) overflows the output count", w.ThoughtsTokenCount)
	}
	return Usage{
		Input:     input + w.ToolUsePromptTokenCount,
		CacheRead: w.CachedContentTokenCount,
		Output:    w.CandidatesTokenCount + w.ThoughtsTokenCount,
		Reasoning: w.ThoughtsTokenCount,
	}, nil
}

// gemFinish is the neutral finish of a Gemini finishReason; called says
// the answer holds a function call (STOP then means tool_calls).
func gemFinish(reason string, called bool) string {
	switch reason {
	case "MAX_TOKENS":
		return FinishLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY":
		return FinishContentFilter
	case "STOP":
		if called {
			return FinishToolCalls
		}
	}
	return FinishStop
}

// gemDecodeError describes a JSON decoding error by field or offset, never
// quoting the answer.
func gemDecodeError(what string, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return malformed("%s: invalid JSON at byte %d", what, se.Offset)
	case errors.As(err, &te) && te.Field != "":
		return malformed("%s: %s must be %s, not %s", what, te.Field, te.Type, te.Value)
	case errors.As(err, &te):
		return malformed("%s: must be a JSON object, not %s", what, te.Value)
	}
	return malformed("%s: malformed JSON", what)
}
