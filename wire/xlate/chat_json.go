package xlate

import "strconv"

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
