package sim

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// # Tool calls, scripted by the prompt
//
// Every text endpoint (chat, responses, messages, Gemini) can answer with
// tool calls, so a test or a coding CLI drives a deterministic tool loop.
// The scripting message is the latest user message that carries no tool
// result (chat: role "user"; messages: a user turn without tool_result
// blocks — text riding beside tool results, as Claude Code sends it, does
// not make one; responses: a user message item or the string input;
// Gemini: a user content without functionResponse parts). Its text parts
// may hold, one per line (surrounding spaces ignored):
//
//	sim:call <tool-name> <JSON object of arguments>
//	sim:calls-parallel
//
// A call line whose arguments are missing calls with {}; one whose
// arguments are not a JSON object is not a call line. When the request
// offers tools (and tool_choice is not "none"; Gemini mode NONE), with n
// call lines and k tool results after the scripting message (chat "tool"
// messages, tool_result blocks, function_call_output items, functionResponse
// parts), the answer for k < n is call k+1 — or, with sim:calls-parallel,
// calls k+1..n at once — after the text "Calling <name>." (parallel:
// "Calling <a>, <b>."); the finish is tool_calls / tool_use / Gemini STOP.
// A call to a tool the request does not offer (chat and responses function
// tools, messages client tools, Gemini functionDeclarations) is answered
// instead with the text "Tool <name> is not offered." and a plain stop.
// For k >= n, or without tools, the answer is the usual reply (count.go).
//
// The arguments are the line's JSON object compacted; ids are
// deterministic: "call_"/"toolu_" + 16 hex digits of a hash of the model,
// the scripting message's position, the line number and the call (responses
// items "fc_" + the same digits). A Gemini functionCall has an id only when
// a functionResponse of the request carries one.
//
// Output tokens: the words of the text, plus per call Tokens(arguments
// JSON) + Tokens(name), plus the reasoning words (below). The request's
// max tokens field caps the reasoning and the usual reply together (the
// reply gets what the reasoning leaves; when the reasoning alone reaches
// it, the answer is the reasoning cut to that many words, no text, no
// call, finish length); the call and not-offered texts are never cut.
//
// # Thinking
//
// Asked for by messages thinking {type:"enabled",budget_tokens} or
// {type:"adaptive"} (its level from output_config.effort, high when
// absent), chat reasoning_effort, responses reasoning.effort, Gemini
// thinkingConfig with includeThoughts or a thinkingBudget > 0 (a budget
// of 0 turns it off). Efforts "none" and "minimal" are off. The level
// gives the reasoning words: low ThinkingLow (8), medium ThinkingMedium
// (16), high ThinkingHigh (32), xhigh/max ThinkingMax (64); a budget maps
// to a level as ≤2048 low, ≤8192 medium, else high; Gemini without a
// budget takes its thinkingLevel, else medium; an effort or level the sim
// does not know is medium. The
// reasoning text is "Considering the request." followed by filler words up
// to that many words; its words are the reasoning tokens.

// Reasoning words per level; see "Thinking" above.
const (
	ThinkingLow    = 8
	ThinkingMedium = 16
	ThinkingHigh   = 32
	ThinkingMax    = 64
)

// effortWords is the reasoning words of an OpenAI or Anthropic effort.
func effortWords(effort string) int {
	switch effort {
	case "", "none", "minimal":
		return 0
	case "low":
		return ThinkingLow
	case "high":
		return ThinkingHigh
	case "xhigh", "max":
		return ThinkingMax
	}
	return ThinkingMedium
}

// budgetWords is the reasoning words of a token budget > 0.
func budgetWords(budget int64) int {
	switch {
	case budget <= 2048:
		return ThinkingLow
	case budget <= 8192:
		return ThinkingMedium
	}
	return ThinkingHigh
}

// ThinkingText returns the reasoning text of a thinking answer with the
// given number of words (ThinkingLow … ThinkingMax): "Considering the
// request." then filler words.
func ThinkingText(words int) string {
	if words <= 0 {
		return ""
	}
	var b strings.Builder
	for i, w := range [...]string{"Considering", "the", "request."} {
		if i == words {
			return b.String()
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	for k := 3; k < words; k++ {
		b.WriteByte(' ')
		b.WriteString(filler[(k-3)%len(filler)])
	}
	return b.String()
}

// Signature returns the signature the sim gives a thinking text it wrote
// for model: "simsig_" and 16 hex digits of an FNV-1a hash of both. A
// messages thinking block must carry exactly this signature for its text.
func Signature(model, thinking string) string {
	h := fnvString(fnvByte(fnvString(fnvOffset, model), 0x1f), thinking)
	return string(appendHex([]byte("simsig_"), h, 16))
}

// encryptedReasoning is a responses reasoning item's encrypted_content.
func encryptedReasoning(model, thinking string) string {
	h := fnvString(fnvByte(fnvString(fnvOffset, model), 0x1e), thinking)
	return string(appendHex([]byte("simenc_"), h, 16))
}

// scriptLine is one sim:call line.
type scriptLine struct{ name, args string }

// script is what the scripting message asks for.
type script struct {
	calls    []scriptLine
	parallel bool
}

// scan adds the script lines of one text.
func (sc *script) scan(text string) {
	if !strings.Contains(text, "sim:call") {
		return
	}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "sim:calls-parallel" {
			sc.parallel = true
			continue
		}
		rest, ok := strings.CutPrefix(line, "sim:call")
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
			continue
		}
		rest = strings.TrimSpace(rest)
		name, args := rest, "{}"
		if i := strings.IndexAny(rest, " \t"); i >= 0 {
			name, args = rest[:i], strings.TrimSpace(rest[i:])
		}
		if compact, ok := compactObject(args); ok {
			sc.calls = append(sc.calls, scriptLine{name: name, args: compact})
		}
	}
}

// compactObject returns s compacted when it is one JSON object.
func compactObject(s string) (string, bool) {
	if s == "" || s[0] != '{' || !json.Valid([]byte(s)) {
		return "", false
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return "", false
	}
	return b.String(), true
}

// convo is what a conversation tells the sim about its tool loop: the
// scripting message (its position, -1 when there is none, and its text
// parts), the tool results after it, and the tools offered.
type convo struct {
	at      int
	texts   []string
	done    int
	offered []string // nil: no tools, or tool_choice none
}

// toolCall is one call of an answer.
type toolCall struct {
	h    uint64 // the id digits
	name string
	args string // a compact JSON object
}

// tokens is the output tokens of the call.
func (c *toolCall) tokens() int64 { return Tokens(c.args) + Tokens(c.name) }

// appendID appends prefix and the call's id digits.
func (c *toolCall) appendID(b []byte, prefix string) []byte {
	return appendHex(append(b, prefix...), c.h, 16)
}

// argPieces splits the arguments into two non-empty pieces at a character
// boundary, for streamed deltas.
func (c *toolCall) argPieces() (string, string) {
	i := len(c.args) / 2
	for i > 1 && !utf8.RuneStart(c.args[i]) {
		i--
	}
	if i < 1 {
		i = 1
	}
	return c.args[:i], c.args[i:]
}

// turn is one answer in neutral form: its reasoning, its text and its
// tool calls.
type turn struct {
	think  string // the reasoning text, "" when none
	thinkN int64  // its words: the reasoning tokens
	rep    reply
	calls  []toolCall
}

// output is every output token of the turn, reasoning included.
func (t *turn) output() int64 { return t.text() + t.thinkN }

// text is the output tokens of the text and the calls.
func (t *turn) text() int64 {
	n := t.rep.words()
	for i := range t.calls {
		n += t.calls[i].tokens()
	}
	return n
}

// planTurn builds the answer: the reasoning of thinkWords words, then the
// next scripted call(s) of cv, or the usual reply of echo; limit (0: none)
// caps the reasoning and the usual reply together.
func planTurn(model string, cv *convo, echo string, limit int64, thinkWords int) turn {
	var t turn
	if thinkWords > 0 {
		if limit > 0 && int64(thinkWords) >= limit {
			t.think, t.thinkN = ThinkingText(int(limit)), limit
			t.rep.capped = true
			return t
		}
		t.think, t.thinkN = ThinkingText(thinkWords), int64(thinkWords)
		if limit > 0 {
			limit -= t.thinkN
		}
	}
	if len(cv.offered) > 0 && cv.at >= 0 {
		var sc script
		for _, s := range cv.texts {
			sc.scan(s)
		}
		if cv.done < len(sc.calls) {
			t.scripted(model, cv, &sc)
			return t
		}
	}
	t.rep = buildReply(model, echo, limit)
	return t
}

// scripted sets the calls the script asks for next, or the not-offered
// text.
func (t *turn) scripted(model string, cv *convo, sc *script) {
	next := sc.calls[cv.done : cv.done+1]
	if sc.parallel {
		next = sc.calls[cv.done:]
	}
	names := make([]string, 0, len(next))
	for i, l := range next {
		if !offers(cv.offered, l.name) {
			t.rep = textReply("Tool " + l.name + " is not offered.")
			t.calls = nil
			return
		}
		h := fnvUint64(fnvString(fnvOffset, model), uint64(cv.at))
		h = fnvUint64(h, uint64(cv.done+i))
		h = fnvString(fnvByte(fnvString(fnvByte(h, 0x1f), l.name), 0x1f), l.args)
		t.calls = append(t.calls, toolCall{h: h, name: l.name, args: l.args})
		names = append(names, l.name)
	}
	t.rep = textReply("Calling " + strings.Join(names, ", ") + ".")
}

func offers(offered []string, name string) bool {
	for _, o := range offered {
		if o == name {
			return true
		}
	}
	return false
}

// textReply is a fixed reply text, never capped.
func textReply(s string) reply {
	r := reply{text: s}
	for i := 0; i < len(s); {
		st, e := nextWord(s, i)
		if st == e {
			break
		}
		r.ends = append(r.ends, e)
		i = e
	}
	return r
}
