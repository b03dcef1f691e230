package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/modelrelay/modelrelay/internal/jsonscan"
)

// geminiUsageWire is the usageMetadata of a Gemini generateContent answer
// or stream chunk. totalTokenCount is the sum of the others and not read.
type geminiUsageWire struct {
	PromptTokenCount        count `json:"promptTokenCount"`
	CachedContentTokenCount count `json:"cachedContentTokenCount"`
	CandidatesTokenCount    count `json:"candidatesTokenCount"`
	ThoughtsTokenCount      count `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount count `json:"toolUsePromptTokenCount"`
}

// scan fills w from the bytes of its object without reflection (see
// usageScanner); false when only encoding/json can be sure.
func (w *geminiUsageWire) scan(obj []byte) bool {
	for _, f := range [...]struct {
		key string
		dst *count
	}{
		{"promptTokenCount", &w.PromptTokenCount},
		{"cachedContentTokenCount", &w.CachedContentTokenCount},
		{"candidatesTokenCount", &w.CandidatesTokenCount},
		{"thoughtsTokenCount", &w.ThoughtsTokenCount},
		{"toolUsePromptTokenCount", &w.ToolUsePromptTokenCount},
	} {
		var ok bool
		if *f.dst, ok = intMember(obj, f.key); !ok {
			return false
		}
	}
	return true
}

func (w *geminiUsageWire) usage() (Usage, error) {
	if err := nonNegativeFields(
		"usageMetadata.promptTokenCount", w.PromptTokenCount,
		"usageMetadata.cachedContentTokenCount", w.CachedContentTokenCount,
		"usageMetadata.candidatesTokenCount", w.CandidatesTokenCount,
		"usageMetadata.thoughtsTokenCount", w.ThoughtsTokenCount,
		"usageMetadata.toolUsePromptTokenCount", w.ToolUsePromptTokenCount,
	); err != nil {
		return Usage{}, err
	}
	if w.CachedContentTokenCount > w.PromptTokenCount {
		return Usage{}, fmt.Errorf("usageMetadata.cachedContentTokenCount (%d) is above usageMetadata.promptTokenCount (%d)",
			w.CachedContentTokenCount, w.PromptTokenCount)
	}
	input := w.PromptTokenCount - w.CachedContentTokenCount
	if w.ToolUsePromptTokenCount > math.MaxInt64-input {
		return Usage{}, fmt.Errorf("usageMetadata.toolUsePromptTokenCount (%d) overflows the input count", w.ToolUsePromptTokenCount)
	}
	if w.ThoughtsTokenCount > math.MaxInt64-w.CandidatesTokenCount {
		return Usage{}, fmt.Errorf("usageMetadata.thoughtsTokenCount (%d) overflows the output count", w.ThoughtsTokenCount)
	}
	return Usage{
		InputTokens:     input + w.ToolUsePromptTokenCount,
		CacheReadTokens: w.CachedContentTokenCount,
		OutputTokens:    w.CandidatesTokenCount + w.ThoughtsTokenCount,
	}, nil
}

// GeminiUsage reads the usage of a Gemini generateContent answer, or of one
// streamed chunk's data: usageMetadata.promptTokenCount (which includes the
// cached part), cachedContentTokenCount, toolUsePromptTokenCount (the
// results of Google's own tools fed back to the model: input, outside the
// prompt count, as totalTokenCount = prompt + candidates + toolUsePrompt +
// thoughts shows), candidatesTokenCount and thoughtsTokenCount. InputTokens
// is prompt minus cached plus tool-use prompt, CacheReadTokens is cached,
// OutputTokens is candidates plus thoughts (thinking is billed as output).
// ok is false when the body has no usageMetadata object or a null one.
// Malformed JSON, a non-integer or negative count, cached above prompt or
// a sum past int64 is an error naming the field.
func GeminiUsage(body []byte) (u Usage, ok bool, err error) {
	val, _, found, sure := jsonscan.Member(body, "usageMetadata")
	if sure && (!found || string(val) == "null") {
		return Usage{}, false, nil
	}
	if sure && len(val) > 0 && val[0] == '{' {
		var w geminiUsageWire
		if w.scan(val) {
			if u, err := w.usage(); err == nil {
				return u, true, nil
			}
		}
	}
	return geminiUsageFull(body)
}

// geminiUsageFull is GeminiUsage by decoding the whole body: the slow path,
// and the reference the fast path is fuzzed against.
func geminiUsageFull(body []byte) (u Usage, ok bool, err error) {
	var v struct {
		UsageMetadata *geminiUsageWire `json:"usageMetadata"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return Usage{}, false, answerError("gemini response", err)
	}
	if v.UsageMetadata == nil {
		return Usage{}, false, nil
	}
	u, err = v.UsageMetadata.usage()
	return u, err == nil, err
}

// NewGeminiMeter returns a Meter for a Gemini streamGenerateContent
// (alt=sse) stream: every chunk may carry usageMetadata, cumulative, so the
// last chunk with a non-null one gives the usage (GeminiUsage); chunks
// without one are skipped. Event names are ignored. Gemini repeats the
// prompt count on early chunks before it knows the output: a stream cut
// short shows its prompt and little or none of its output.
func NewGeminiMeter() Meter {
	return &lastUsageMeter{may: mayHaveUsageMetadata, read: GeminiUsage}
}

// usageMetadataKey is what mayHaveUsageMetadata looks for.
var usageMetadataKey = []byte(`"usageMetadata"`)

// mayHaveUsageMetadata is mayHaveUsage for Gemini's key: does data contain
// "usageMetadata" followed by a colon and a value other than null?
func mayHaveUsageMetadata(data []byte) bool {
	for {
		i := bytes.Index(data, usageMetadataKey)
		if i < 0 {
			return false
		}
		data = data[i+len(usageMetadataKey):]
		j := skipSpace(data, 0)
		if j >= len(data) || data[j] != ':' {
			continue
		}
		j = skipSpace(data, j+1)
		if j < len(data) && data[j] != 'n' {
			return true
		}
	}
}

// GeminiText is the delivered text of one Gemini stream chunk, for the
// estimate of a stream that ends without usage: the bytes of
// candidates[].content.parts[].text (answer and thought text) and of each
// functionCall.args object as sent. Like ChatText it scans, and decodes
// with encoding/json only when the scan is not sure.
func GeminiText(data []byte) int {
	if len(data) == 0 || data[0] != '{' {
		return 0
	}
	if n, ok := scanGeminiText(data); ok {
		return n
	}
	return decodeGeminiText(data)
}

// scanGeminiText sums candidates[].content.parts[] text and args.
func scanGeminiText(data []byte) (int, bool) {
	cands, ok := textField(data, "candidates", '[')
	if !ok || cands == nil {
		return 0, ok
	}
	return sumElements(cands, scanGeminiCandidate)
}

func scanGeminiCandidate(cand []byte) (int, bool) {
	content, ok := elementField(cand, "content", '{')
	if !ok || content == nil {
		return 0, ok
	}
	parts, ok := textField(content, "parts", '[')
	if !ok || parts == nil {
		return 0, ok
	}
	return sumElements(parts, scanGeminiPart)
}

func scanGeminiPart(part []byte) (int, bool) {
	obj, ok := nullOr(part, '{')
	if !ok || obj == nil {
		return 0, ok
	}
	n, ok := textString(obj, "text")
	if !ok {
		return 0, false
	}
	fc, ok := textField(obj, "functionCall", '{')
	if !ok || fc == nil {
		return n, ok
	}
	args, _, found, ok := jsonscan.Member(fc, "args")
	if !ok {
		return 0, false
	}
	if !found || len(args) == 0 || args[0] != '{' {
		return n, true // absent, null or not an object: no arguments text
	}
	return n + len(args), true
}

func decodeGeminiText(data []byte) int {
	var ch struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text         string `json:"text"`
					FunctionCall struct {
						Args json.RawMessage `json:"args"`
					} `json:"functionCall"`
				} `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	if json.Unmarshal(data, &ch) != nil {
		return 0
	}
	n := 0
	for _, c := range ch.Candidates {
		for _, p := range c.Content.Parts {
			n += len(p.Text)
			if len(p.FunctionCall.Args) > 0 && p.FunctionCall.Args[0] == '{' {
				n += len(p.FunctionCall.Args)
			}
		}
	}
	return n
}
