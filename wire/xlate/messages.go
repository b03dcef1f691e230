package xlate

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file and the other messages*.go files are Anthropic's Messages
// API (POST /v1/messages), in all six directions: a caller's request
// (messages_parse.go, messages_settings.go), the request to an Anthropic
// upstream (messages_build.go), the JSON answer both ways
// (messages_answer.go), and the event stream both ways
// (messages_decode.go, messages_encode.go).
//
// cache_control markers on a caller's system blocks, content blocks and
// tools are read and dropped: caching hints mean nothing to another
// upstream, and the charge still follows the cache usage the upstream
// reports. So is context_management (Claude Code sends it to have old
// thinking or tool results cleared upstream): another upstream is sent the
// conversation as the caller sent it. A caller's metadata other than user_id does not exist in the
// Messages API; a neutral request's OpenAI-style Metadata has no Messages
// field either and is left out of a request to an Anthropic upstream.

// DefaultMaxTokens is the max_tokens a request to an Anthropic upstream
// carries when the caller gave no output bound: the Messages API requires
// one.
const DefaultMaxTokens = 4096

func init() {
	register(Messages, &codec{
		parseRequest: msgParseRequest,
		buildRequest: msgBuildRequest,
		parseAnswer:  msgParseAnswer,
		writeAnswer:  msgWriteAnswer,
		newDecoder:   msgNewDecoder,
		newEncoder:   msgNewEncoder,
	})
}

// msgUsageWire is a Messages usage object; absent (or null) fields are nil,
// so that a stream's later usage replaces only what it carries.
type msgUsageWire struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheCreation            *struct {
		Ephemeral5m *int64 `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h *int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
}

// msgUsageState is the usage of one message as its usage objects report
// it, merged field by field.
type msgUsageState struct {
	input, output, read, creation int64
	breakdown                     bool // a cache_creation breakdown was seen
	write5m, write1h              int64
}

// merge takes the fields w carries (absent ones keep their values), or
// names the first negative count.
func (s *msgUsageState) merge(w *msgUsageWire) error {
	set := func(dst *int64, v *int64, name string) error {
		if v == nil {
			return nil
		}
		if *v < 0 {
			return malformed("usage.%s is negative", name)
		}
		*dst = *v
		return nil
	}
	if err := errors.Join(
		set(&s.input, w.InputTokens, "input_tokens"),
		set(&s.output, w.OutputTokens, "output_tokens"),
		set(&s.read, w.CacheReadInputTokens, "cache_read_input_tokens"),
		set(&s.creation, w.CacheCreationInputTokens, "cache_creation_input_tokens"),
	); err != nil {
		return err
	}
	if c := w.CacheCreation; c != nil {
		s.breakdown = true
		s.write5m, s.write1h = 0, 0
		return errors.Join(
			set(&s.write5m, c.Ephemeral5m, "cache_creation.ephemeral_5m_input_tokens"),
			set(&s.write1h, c.Ephemeral1h, "cache_creation.ephemeral_1h_input_tokens"),
		)
	}
	return nil
}

// usage is the neutral usage. Without a cache_creation breakdown every
// cache write is a 5-minute one; with it, 1-hour writes are its 1-hour
// count and 5-minute writes the larger of its 5-minute count and the rest
// of cache_creation_input_tokens — the split package wire charges by, so
// that the usage a caller sees is the usage charged. Counts whose sum
// overflows are malformed.
func (s *msgUsageState) usage() (Usage, error) {
	u := Usage{Input: s.input, CacheRead: s.read, CacheWrite5m: s.creation, Output: s.output}
	if s.breakdown {
		u.CacheWrite1h = s.write1h
		u.CacheWrite5m = max(s.write5m, s.creation-s.write1h)
	}
	var sum int64
	for _, v := range [...]int64{u.Input, u.CacheRead, u.CacheWrite5m, u.CacheWrite1h, u.Output} {
		if v > math.MaxInt64-sum {
			return Usage{}, malformed("usage counts overflow")
		}
		sum += v
	}
	return u, nil
}

// msgFinish is the neutral finish reason of a stop_reason.
func msgFinish(stopReason string) string {
	switch stopReason {
	case "max_tokens", "model_context_window_exceeded":
		return FinishLength
	case "tool_use":
		return FinishToolCalls
	case "stop_sequence":
		return FinishStopSequence
	case "refusal":
		return FinishContentFilter
	}
	return FinishStop // end_turn, pause_turn
}

// msgStopReason is the stop_reason of a neutral finish reason.
func msgStopReason(finish string) string {
	switch finish {
	case FinishLength:
		return "max_tokens"
	case FinishToolCalls:
		return "tool_use"
	case FinishStopSequence:
		return "stop_sequence"
	case FinishContentFilter:
		return "refusal"
	}
	return "end_turn"
}

// msgAppendUsage appends a Messages usage object in the caller's
// convention; breakdown adds the cache_creation object.
func msgAppendUsage(dst []byte, u *Usage, breakdown bool) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, u.Input, 10)
	dst = append(dst, `,"cache_creation_input_tokens":`...)
	dst = strconv.AppendInt(dst, u.CacheWrite5m+u.CacheWrite1h, 10)
	dst = append(dst, `,"cache_read_input_tokens":`...)
	dst = strconv.AppendInt(dst, u.CacheRead, 10)
	if breakdown {
		dst = append(dst, `,"cache_creation":{"ephemeral_5m_input_tokens":`...)
		dst = strconv.AppendInt(dst, u.CacheWrite5m, 10)
		dst = append(dst, `,"ephemeral_1h_input_tokens":`...)
		dst = strconv.AppendInt(dst, u.CacheWrite1h, 10)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"output_tokens":`...)
	dst = strconv.AppendInt(dst, u.Output, 10)
	return append(dst, '}')
}

// msgAppendObject appends raw, which must be one JSON object, compacted;
// empty raw is {}. ok is false when raw is not a JSON object.
func msgAppendObject(dst []byte, raw string) ([]byte, bool) {
	t := strings.Trim(raw, " \t\r\n")
	if t == "" {
		return append(dst, '{', '}'), true
	}
	if t[0] != '{' {
		return dst, false
	}
	n := len(dst)
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, []byte(t)); err != nil {
		return dst[:n], false
	}
	return buf.Bytes(), true
}

// msgClip is a name from a body (a block or tool type, an id) clipped to
// 64 bytes for an error message.
func msgClip(s string) string {
	if len(s) <= 64 {
		return s
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// msgQuote is a type name from a body as an error shows it: clipped, and
// quoted unless it is a plain name, so that "the web_search_20250305
// tool" reads as Anthropic names it.
func msgQuote(s string) string {
	s = msgClip(s)
	for _, c := range s {
		if c != '_' && c != '-' && c != '.' && (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}
