package sim

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// # Token counting
//
// Every number is deterministic and the exported helpers (ChatUsage,
// ResponsesUsage, MessagesUsage, GeminiUsage, SystemOneUsage, ReplyText)
// compute exactly what the server reports.
//
//   - Tokens(s) = ceil(len(s)/4), len in bytes: 0 for "", at least 1 otherwise.
//   - A content is a string (Tokens of it) or an array of parts: a part of
//     type text, input_text or output_text counts Tokens(text); any other
//     part (image, file, tool_use, tool_result, …) counts PartTokens (85).
//   - Chat prompt_tokens = Σ over messages (MessageTokens (4) + content).
//     Tools, names and tool_calls are not counted.
//   - Responses input_tokens = Tokens(instructions) + (a string input:
//     4 + Tokens(input); an item array: per item with content 4 + content,
//     per other item 4 + Tokens of its raw JSON).
//   - Chat and responses cached tokens (stateless): 0 below CacheMinTokens
//     (1024) prompt tokens, else floor(prompt/2/64)*64. They are part of
//     prompt_tokens / input_tokens, as upstream. A request with a
//     prompt_cache_key is different: see cache.go.
//   - Messages: the prompt is the system blocks, then per message (system
//     turns included) 4 + its blocks. Tools are not counted. See cache.go for how it splits into input_tokens,
//     cache reads and cache writes.
//   - Typed questions: input_tokens = Tokens(state) + Σ per question
//     (Tokens(name) + Tokens(instructions) + Σ Tokens(option)); output 0.
//
// # Completions
//
// An answer is, in order: the reasoning when thinking is asked for, the
// text, the tool calls the prompt scripts (turn.go). The usual reply text
// is "Simulated reply from <model>:" followed by the first EchoWords (64)
// whitespace-separated words of the last user message (its text parts
// joined by spaces), then filler words until it has ReplyWords
// (24) words. A canary in a short prompt therefore appears in the reply.
// The completion token count is the number of words. The request's max
// tokens field (chat: max_completion_tokens, else max_tokens; responses:
// max_output_tokens; messages: max_tokens) caps the words; when it cuts the
// reply, chat finish_reason is "length", responses status "incomplete" with
// incomplete_details.reason "max_output_tokens", messages stop_reason
// "max_tokens" (otherwise "stop", "completed", "end_turn"; with tool
// calls "tool_calls", "completed", "tool_use"). A max tokens field below 1
// is 400. With thinking, the field caps the reasoning and the reply
// together (turn.go).

// Counting constants; "Token counting" above states the rules they belong to.
const (
	MessageTokens   = 4    // per chat/messages message and per responses input item
	PartTokens      = 85   // per non-text content part (image, file, tool_use, …)
	CacheMinTokens  = 1024 // chat/responses: prompts below this have no cached tokens
	CacheBlock      = 64   // chat/responses: cached tokens are a multiple of this
	ReplyWords      = 24   // completion length (words) when nothing caps it
	EchoWords       = 64   // at most this many words of the last user message are echoed
	StateTokenLimit = 32768
)

// Tokens is the sim's token count of a text: ceil(len(s)/4), len in bytes.
// It is 0 for "" and at least 1 otherwise.
func Tokens(s string) int64 { return tokensN(len(s)) }

func tokensN(n int) int64 { return (int64(n) + 3) / 4 }

// Counts are the usage numbers the sim reports for one request. Fields are
// read per endpoint:
//
//   - chat: Prompt = prompt_tokens, Cached = prompt_tokens_details.cached_tokens
//     (included in Prompt), Completion = completion_tokens.
//   - responses: Prompt = input_tokens, Cached = input_tokens_details.cached_tokens
//     (included in Prompt), Completion = output_tokens.
//   - messages: Prompt = input_tokens (neither read from nor written to the
//     cache), Cached = cache_read_input_tokens, CacheWrite = ephemeral 5m
//     writes, CacheWrite1h = ephemeral 1h writes (their sum is
//     cache_creation_input_tokens), Completion = output_tokens.
//   - systemone: Prompt = input_tokens; Completion is 0.
//   - gemini: Prompt = promptTokenCount, Cached = cachedContentTokenCount
//     (included in Prompt), Completion = candidatesTokenCount (text and
//     calls), Reasoning = thoughtsTokenCount (not in Completion).
//
// Reasoning is the reasoning tokens of a thinking answer (turn.go): chat
// completion_tokens_details.reasoning_tokens, responses
// output_tokens_details.reasoning_tokens, both included in Completion, as
// they are in messages output_tokens; Gemini thoughtsTokenCount.
//
// Capped reports that the completion stopped at the request's max tokens
// field (finish_reason "length", status "incomplete", stop_reason
// "max_tokens").
type Counts struct {
	Prompt       int64
	Cached       int64
	CacheWrite   int64
	CacheWrite1h int64
	Completion   int64
	Reasoning    int64
	Capped       bool
}

// setOutput sets the output counts of an answer: Completion includes the
// reasoning (chat, responses, messages).
func (c *Counts) setOutput(t *turn) {
	c.Completion, c.Reasoning, c.Capped = t.output(), t.thinkN, t.rep.capped
}

// contentTokens counts a content: text parts by Tokens, others PartTokens.
func contentTokens(c *content) int64 {
	if c == nil {
		return 0
	}
	var n int64
	for i := range c.parts {
		n += partTokens(&c.parts[i])
	}
	return n
}

func partTokens(p *part) int64 {
	if isText(p.Type) {
		return Tokens(p.Text)
	}
	return PartTokens
}

// cachedTokens is the chat/responses cached-token rule.
func cachedTokens(prompt int64) int64 {
	if prompt < CacheMinTokens {
		return 0
	}
	return prompt / 2 / CacheBlock * CacheBlock
}

// lastText returns the text of the last message whose role is role: its
// text parts joined by a space.
func lastText(msgs []chatMessage, role string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == role {
			return partsText(&msgs[i].Content)
		}
	}
	return ""
}

func partsText(c *content) string {
	if c == nil {
		return ""
	}
	if len(c.parts) == 1 {
		return c.parts[0].Text
	}
	var b strings.Builder
	for _, p := range c.parts {
		if !isText(p.Type) || p.Text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// chatPlan computes the counts and echo text of a parsed chat request.
func chatPlan(req *chatRequest) (c Counts, echo string, limit int64) {
	for i := range req.Messages {
		c.Prompt += MessageTokens + contentTokens(&req.Messages[i].Content)
	}
	if req.PromptCacheKey == "" { // else keyedCached decides, from the sim's cache
		c.Cached = cachedTokens(c.Prompt)
	}
	limit, _ = limitField("max_tokens", req.MaxTokens)
	if req.MaxCompletionTokens != nil {
		limit, _ = limitField("max_completion_tokens", req.MaxCompletionTokens)
	}
	echo = lastText(req.Messages, "user")
	return c, echo, limit
}

// responsesPlan computes the counts and echo text of a parsed responses
// request.
func responsesPlan(req *responsesRequest) (c Counts, echo string, limit int64) {
	if req.Instructions != nil {
		c.Prompt += Tokens(*req.Instructions)
	}
	in := req.Input
	if in.str {
		c.Prompt += MessageTokens + Tokens(in.text)
		echo = in.text
	} else {
		last := -1
		for i := range in.items {
			it := &in.items[i]
			if it.hasContent {
				c.Prompt += MessageTokens + contentTokens(it.Content)
				if it.Role == "user" {
					last = i
				}
			} else {
				c.Prompt += MessageTokens + tokensN(it.rawLen)
			}
		}
		if last >= 0 {
			echo = partsText(in.items[last].Content)
		}
	}
	if req.PromptCacheKey == "" { // else keyedCached decides, from the sim's cache
		c.Cached = cachedTokens(c.Prompt)
	}
	limit, _ = limitField("max_output_tokens", req.MaxOutputTokens)
	return c, echo, limit
}

// reply is a generated completion: its text, the byte offset where each
// word ends, and its length in words.
type reply struct {
	text   string
	ends   []int
	capped bool
}

func (r *reply) words() int64 { return int64(len(r.ends)) }

// chunk returns content chunk i of n: the words [i*W/n, (i+1)*W/n), with
// the space that precedes them. The chunks concatenate to the text; a chunk
// is empty when there are fewer words than chunks.
func (r *reply) chunk(i, n int) string {
	w := len(r.ends)
	a, b := i*w/n, (i+1)*w/n
	if a == b {
		return ""
	}
	start := 0
	if a > 0 {
		start = r.ends[a-1]
	}
	return r.text[start:r.ends[b-1]]
}

// filler pads a reply to ReplyWords words.
var filler = strings.Fields("the quick brown fox jumps over the lazy dog while " +
	"seven wizards quietly pack boxes of liquor jugs and " +
	"a sphinx of black quartz judges every vow")

// buildReply writes the deterministic completion: "Simulated reply from
// <model>:", up to EchoWords words of echo, then filler words up to
// ReplyWords words in all; then at most limit words when limit > 0.
func buildReply(model, echo string, limit int64) reply {
	var r reply
	total := 4 // the header words
	echoN := 0
	for i := 0; i < len(echo) && echoN < EchoWords; {
		s, e := nextWord(echo, i)
		if s == e {
			break
		}
		echoN++
		i = e
	}
	total += echoN
	if total < ReplyWords {
		total = ReplyWords
	}
	if limit > 0 && int64(total) > limit {
		total = int(limit)
		r.capped = true
	}
	b := make([]byte, 0, 32+len(model)+min(len(echo), 1024)+8*total)
	r.ends = make([]int, 0, total)
	add := func(word, suffix string) {
		if len(r.ends) > 0 {
			b = append(b, ' ')
		}
		b = append(b, word...)
		b = append(b, suffix...)
		r.ends = append(r.ends, len(b))
	}
	for k, w := range [4]string{"Simulated", "reply", "from", model} {
		if len(r.ends) == total {
			break
		}
		if k == 3 {
			add(w, ":")
		} else {
			add(w, "")
		}
	}
	for i := 0; i < len(echo) && len(r.ends) < total && len(r.ends) < 4+EchoWords; {
		s, e := nextWord(echo, i)
		if s == e {
			break
		}
		add(echo[s:e], "")
		i = e
	}
	for k := 0; len(r.ends) < total; k++ {
		add(filler[k%len(filler)], "")
	}
	r.text = string(b)
	return r
}

// nextWord returns the bounds of the first whitespace-separated word of s
// at or after i; s == e when there is none.
func nextWord(s string, i int) (start, end int) {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += size
	}
	start = i
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			break
		}
		i += size
	}
	return start, i
}

// ReplyText returns the completion the sim writes for model when the last
// user message is userText and the max tokens field is limit (0 = none),
// and whether limit cut it short. Its token count is its number of
// whitespace-separated words.
func ReplyText(model, userText string, limit int64) (text string, capped bool) {
	r := buildReply(model, userText, limit)
	return r.text, r.capped
}

// ChatUsage returns the usage the sim reports for a chat completion request
// body (the same for JSON and streamed replies).
func ChatUsage(body []byte) (Counts, error) {
	req, err := parseChat(body)
	if err != nil {
		return Counts{}, usageErr(err, req)
	}
	c, echo, limit := chatPlan(req)
	t := chatTurn(req, echo, limit)
	c.setOutput(&t)
	return c, nil
}

// chatTurn plans the answer of a chat request.
func chatTurn(req *chatRequest, echo string, limit int64) turn {
	cv := chatConvo(req)
	return planTurn(req.Model, &cv, echo, limit, effortWords(req.ReasoningEffort))
}

// responsesTurn plans the answer of a responses request.
func responsesTurn(req *responsesRequest, echo string, limit int64) turn {
	cv := responsesConvo(req)
	return planTurn(req.Model, &cv, echo, limit, req.thinkWords())
}

// messagesTurn plans the answer of a messages request.
func messagesTurn(req *messagesRequest) turn {
	cv := messagesConvo(req)
	return planTurn(req.Model, &cv, lastText(req.Messages, "user"), *req.MaxTokens, req.thinkWords())
}

// ResponsesUsage returns the usage the sim reports for a responses request
// body.
func ResponsesUsage(body []byte) (Counts, error) {
	req, err := parseResponses(body)
	if err != nil {
		return Counts{}, usageErr(err, req)
	}
	c, echo, limit := responsesPlan(req)
	if req.Input.compactionTrigger() {
		c.Completion = CompactTokens
		return c, nil
	}
	t := responsesTurn(req, echo, limit)
	c.setOutput(&t)
	return c, nil
}

// MessagesUsage returns the usage the sim reports for a messages request
// body the first time its cache breakpoints are seen (every breakpoint a
// cache write). When the sim has already seen a prefix, the tokens up to it
// move from CacheWrite/CacheWrite1h to Cached (see cache.go).
func MessagesUsage(body []byte) (Counts, error) {
	req, err := parseMessages(body)
	if err != nil {
		return Counts{}, usageErr(err, req)
	}
	p := messagesPrefix(req)
	c := p.counts(nil, 0)
	t := messagesTurn(req)
	c.setOutput(&t)
	return c, nil
}

// SystemOneUsage returns the usage the sim reports for a typed-question
// request body; it fails for a body the sim answers 4xx.
func SystemOneUsage(body []byte) (Counts, error) {
	req, err := parseSystemOne(body)
	if err != nil {
		return Counts{}, usageErr(err, req)
	}
	if problems := req.validate(); len(problems) > 0 {
		return Counts{}, errors.New("validation: " + problems[0].Msg)
	}
	return Counts{Prompt: req.inputTokens()}, nil
}

func usageErr(err error, req interface{ model() string }) error {
	if errors.Is(err, errModel) {
		return errors.New("model `" + req.model() + "` is not served by this endpoint")
	}
	return err
}

func (r *chatRequest) model() string      { return r.Model }
func (r *responsesRequest) model() string { return r.Model }
func (r *messagesRequest) model() string  { return r.Model }
func (r *systemOneRequest) model() string { return r.Model }
