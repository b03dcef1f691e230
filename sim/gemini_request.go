package sim

import (
	"errors"
	"strconv"
	"strings"
)

// # Gemini
//
// POST /v1beta/models/{model}:generateContent answers a
// GenerateContentResponse; :streamGenerateContent?alt=sse streams its
// chunks as `data: {chunk}` events, without a [DONE] (another alt is 400).
// The models are those of the Gemini family (modelf-flash, modelf-v4-pro);
// any other is 404 NOT_FOUND. Every error, fault and 401 is in Google's
// shape {"error":{"code","message","status"}}. The key may come as
// x-goog-api-key (or ?key=), besides the Bearer and x-api-key of the other
// endpoints.
//
// The request: contents (role "user" — or none — and "model"; parts text,
// thought, thoughtSignature, inlineData, fileData, functionCall,
// functionResponse), systemInstruction, tools[].functionDeclarations,
// toolConfig.functionCallingConfig.mode, generationConfig
// (maxOutputTokens, thinkingConfig {thinkingBudget, includeThoughts,
// thinkingLevel}; the rest — stopSequences, temperature, topP, topK,
// responseMimeType, responseJsonSchema, … — pass unread). Both the
// camelCase and the snake_case spellings are read, as Google reads them.
//
// Counting: promptTokenCount = Σ Tokens of the systemInstruction text parts
// + Σ per content (MessageTokens + per part Tokens(text) for a text or
// thought part, PartTokens for any other). cachedContentTokenCount (only
// when not 0, and part of promptTokenCount) follows the chat rule for
// requests without a prompt_cache_key: implicit caching of
// floor(prompt/2/64)*64 from CacheMinTokens on. The reply and the tool
// loop are those of every endpoint (count.go, turn.go), echoing the last
// user content's text parts; candidatesTokenCount is the words of the text
// plus the calls' tokens, thoughtsTokenCount the reasoning words (apart,
// as Gemini reports them), totalTokenCount their sum with the prompt.
// finishReason is STOP, or MAX_TOKENS when maxOutputTokens cut the reply.
//
// The answer: candidates[0].content.parts = the thought part {text,
// thought:true} when thinkingConfig.includeThoughts, the text part, then
// one functionCall part {id?, name, args} per call. With thinking, the
// thoughtSignature Signature(model, reasoning text) is on the first
// functionCall part, else on the thought part, else on the text part.
// Streamed: the thought part alone first (an opening event), one text part
// per content chunk, then a last chunk holding the functionCall parts (or
// an empty text part, which carries the signature the whole answer puts on
// its text part), finishReason and usageMetadata. Only the last chunk has
// usageMetadata; every chunk has modelVersion and responseId.

// geminiCall is a functionCall or functionResponse: the sim reads id and
// name.
type geminiCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// geminiPart is one part. Text is set for a text or thought part.
type geminiPart struct {
	Text      *string     `json:"text"`
	Thought   bool        `json:"thought"`
	Sig       *string     `json:"thoughtSignature"`
	SigS      *string     `json:"thought_signature"`
	Call      *geminiCall `json:"functionCall"`
	CallS     *geminiCall `json:"function_call"`
	Response  *geminiCall `json:"functionResponse"`
	ResponseS *geminiCall `json:"function_response"`
}

func (p *geminiPart) signature() *string { return first(p.Sig, p.SigS) }
func (p *geminiPart) call() *geminiCall  { return first(p.Call, p.CallS) }
func (p *geminiPart) response() *geminiCall {
	return first(p.Response, p.ResponseS)
}

// first returns a when set, else b: the camelCase and snake_case
// spellings of one field.
func first[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

// tokens counts the parts of a content.
func (c *geminiContent) tokens() int64 {
	var n int64
	for i := range c.Parts {
		if t := c.Parts[i].Text; t != nil {
			n += Tokens(*t)
		} else {
			n += PartTokens
		}
	}
	return n
}

// texts returns the text parts that are not thoughts.
func (c *geminiContent) texts() []string {
	var out []string
	for i := range c.Parts {
		if p := &c.Parts[i]; p.Text != nil && !p.Thought {
			out = append(out, *p.Text)
		}
	}
	return out
}

type geminiTool struct {
	Decls  []geminiCall `json:"functionDeclarations"`
	DeclsS []geminiCall `json:"function_declarations"`
}

type geminiCallingConfig struct {
	Mode string `json:"mode"`
}

type geminiToolConfig struct {
	Calling  *geminiCallingConfig `json:"functionCallingConfig"`
	CallingS *geminiCallingConfig `json:"function_calling_config"`
}

type geminiThinking struct {
	Budget   *int64 `json:"thinkingBudget"`
	BudgetS  *int64 `json:"thinking_budget"`
	Include  *bool  `json:"includeThoughts"`
	IncludeS *bool  `json:"include_thoughts"`
	Level    string `json:"thinkingLevel"`
	LevelS   string `json:"thinking_level"`
}

type geminiGenConfig struct {
	MaxTokens  *int64          `json:"maxOutputTokens"`
	MaxTokensS *int64          `json:"max_output_tokens"`
	Thinking   *geminiThinking `json:"thinkingConfig"`
	ThinkingS  *geminiThinking `json:"thinking_config"`
}

// geminiRequest is the part of a GenerateContentRequest the sim reads;
// model is the one of the path.
type geminiRequest struct {
	model      string
	Contents   []geminiContent   `json:"contents"`
	System     *geminiContent    `json:"systemInstruction"`
	SystemS    *geminiContent    `json:"system_instruction"`
	Tools      []geminiTool      `json:"tools"`
	ToolConfig *geminiToolConfig `json:"toolConfig"`
	ToolConfS  *geminiToolConfig `json:"tool_config"`
	GenConfig  *geminiGenConfig  `json:"generationConfig"`
	GenConfS   *geminiGenConfig  `json:"generation_config"`
}

func (r *geminiRequest) genConfig() *geminiGenConfig {
	if g := first(r.GenConfig, r.GenConfS); g != nil {
		return g
	}
	return &geminiGenConfig{}
}

// limit is maxOutputTokens, 0 when absent.
func (r *geminiRequest) limit() int64 {
	if m := first(r.genConfig().MaxTokens, r.genConfig().MaxTokensS); m != nil {
		return *m
	}
	return 0
}

// thinking returns the reasoning words asked for and whether the thought
// part is to be shown: thinking is on with includeThoughts or a budget
// above 0, and off with a budget of 0.
func (r *geminiRequest) thinking() (words int, show bool) {
	g := r.genConfig()
	tc := first(g.Thinking, g.ThinkingS)
	if tc == nil {
		return 0, false
	}
	include := first(tc.Include, tc.IncludeS)
	show = include != nil && *include
	budget := first(tc.Budget, tc.BudgetS)
	switch {
	case budget != nil && *budget == 0:
		return 0, false
	case budget != nil && *budget > 0:
		return budgetWords(*budget), show
	case !show:
		return 0, false
	}
	level := tc.Level
	if level == "" {
		level = tc.LevelS
	}
	if level == "" {
		return ThinkingMedium, true
	}
	return effortWords(strings.ToLower(level)), true
}

// parseGemini decodes and validates a GenerateContentRequest.
func parseGemini(body []byte) (*geminiRequest, error) {
	var req geminiRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	if len(req.Contents) == 0 {
		return nil, errors.New("contents: contents is not specified")
	}
	if m := first(req.genConfig().MaxTokens, req.genConfig().MaxTokensS); m != nil && *m < 1 {
		return nil, errors.New("generationConfig.maxOutputTokens: must be at least 1, got " + strconv.FormatInt(*m, 10))
	}
	var names []string
	for i := range req.Contents {
		c := &req.Contents[i]
		at := "contents[" + strconv.Itoa(i) + "]"
		if c.Role != "" && c.Role != "user" && c.Role != "model" {
			return nil, errors.New(at + ".role: Please use a valid role: user, model.")
		}
		for j := range c.Parts {
			p := &c.Parts[j]
			pat := at + ".parts[" + strconv.Itoa(j) + "]"
			if s := p.signature(); s != nil && !strings.HasPrefix(*s, "simsig_") {
				return nil, errors.New(pat + ".thoughtSignature: Thought signature is not valid.")
			}
			if fc := p.call(); fc != nil {
				names = append(names, fc.Name)
			}
			if fr := p.response(); fr != nil && !has(names, fr.Name) {
				return nil, errors.New(pat + ".functionResponse.name: " + strconv.Quote(fr.Name) + " is the name of no earlier functionCall")
			}
		}
	}
	if err := req.unsignedCall(); err != nil {
		return nil, err
	}
	return &req, nil
}

// unsignedCall refuses, as Gemini 3 does, a request with thinking on whose
// current turn (the contents after the last user content that is no
// function response) holds a model content whose first functionCall
// part carries no thoughtSignature: with thinking on, the sim signs the
// first call of every answer, so the caller dropped the signature.
func (r *geminiRequest) unsignedCall() error {
	if words, _ := r.thinking(); words == 0 {
		return nil
	}
	from := 0
	for i := range r.Contents {
		c := &r.Contents[i]
		if c.Role == "model" {
			continue
		}
		turn := true
		for j := range c.Parts {
			turn = turn && c.Parts[j].response() == nil
		}
		if turn {
			from = i + 1
		}
	}
	for i := from; i < len(r.Contents); i++ {
		c := &r.Contents[i]
		if c.Role != "model" {
			continue
		}
		for j := range c.Parts {
			p := &c.Parts[j]
			if fc := p.call(); fc != nil {
				if p.signature() == nil {
					return errors.New("Function call is missing a thought_signature in functionCall parts. " +
						"This is required for tools to work correctly. Additional data, function call `" + fc.Name +
						"`, position contents[" + strconv.Itoa(i) + "].parts[" + strconv.Itoa(j) + "].")
				}
				break
			}
		}
	}
	return nil
}

// geminiConvo reads a Gemini request's tool loop, and whether its
// function responses carry ids.
func geminiConvo(req *geminiRequest) (cv convo, ids bool) {
	cv.at = -1
	tc := first(req.ToolConfig, req.ToolConfS)
	if tc != nil {
		if cc := first(tc.Calling, tc.CallingS); cc != nil && strings.EqualFold(cc.Mode, "NONE") {
			return cv, false
		}
	}
	for _, t := range req.Tools {
		for _, decls := range [2][]geminiCall{t.Decls, t.DeclsS} {
			for _, d := range decls {
				if d.Name != "" {
					cv.offered = append(cv.offered, d.Name)
				}
			}
		}
	}
	if len(cv.offered) == 0 {
		return cv, false
	}
	for i := len(req.Contents) - 1; i >= 0; i-- {
		c := &req.Contents[i]
		if c.Role == "model" {
			continue
		}
		n := 0
		for j := range c.Parts {
			if fr := c.Parts[j].response(); fr != nil {
				n++
				ids = ids || fr.ID != ""
			}
		}
		if n > 0 {
			cv.done += n
			continue
		}
		cv.at, cv.texts = i, c.texts()
		break
	}
	return cv, ids
}

// geminiPlan counts a Gemini request and plans its answer.
func geminiPlan(req *geminiRequest) (c Counts, t turn, show, ids bool) {
	if sys := first(req.System, req.SystemS); sys != nil {
		for i := range sys.Parts {
			if p := sys.Parts[i].Text; p != nil {
				c.Prompt += Tokens(*p)
			}
		}
	}
	last := -1
	for i := range req.Contents {
		ct := &req.Contents[i]
		c.Prompt += MessageTokens + ct.tokens()
		if ct.Role != "model" {
			last = i
		}
	}
	echo := ""
	if last >= 0 {
		echo = strings.Join(req.Contents[last].texts(), " ")
	}
	c.Cached = cachedTokens(c.Prompt)
	cv, ids := geminiConvo(req)
	words, show := req.thinking()
	t = planTurn(req.model, &cv, echo, req.limit(), words)
	c.Completion, c.Reasoning, c.Capped = t.text(), t.thinkN, t.rep.capped
	return c, t, show, ids
}

// GeminiUsage returns the usage the sim reports for a generateContent or
// streamGenerateContent request body: Completion is candidatesTokenCount
// and Reasoning thoughtsTokenCount (apart). The model is in the path; no
// count depends on it.
func GeminiUsage(body []byte) (Counts, error) {
	req, err := parseGemini(body)
	if err != nil {
		return Counts{}, err
	}
	c, _, _, _ := geminiPlan(req)
	return c, nil
}
