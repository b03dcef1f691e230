package xlate

import (
	"strconv"
	"unicode/utf8"
)

// The stream encoder appends its JSON by hand: every event of a translated
// stream passes through it, and reflection per event would cost more than
// the translation itself.

const chatHex = "0123456789abcdef"

// chatAppendString appends s as a JSON string: quotes, backslashes and
// control characters escaped as JSON (not Go) requires, bytes that are
// not UTF-8 replaced with U+FFFD as encoding/json does, and U+2028 and
// U+2029 escaped so that the output is also valid JavaScript.
func chatAppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', chatHex[b>>4], chatHex[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', chatHex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// chatAppendUsage appends u as a chat usage object: prompt_tokens is every
// input token, cached_tokens the cache reads among them, completion_tokens
// the output with its reasoning tokens.
func chatAppendUsage(dst []byte, u Usage) []byte {
	prompt := u.PromptTotal()
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, prompt, 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, u.Output, 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, prompt+u.Output, 10)
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, u.CacheRead, 10)
	dst = append(dst, `},"completion_tokens_details":{"reasoning_tokens":`...)
	dst = strconv.AppendInt(dst, u.Reasoning, 10)
	return append(dst, `}}`...)
}
