package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// # Token counts and compaction
//
// count_tokens answers the whole prompt a messages call with the same body
// counts (input, cache reads and cache writes together); it reads and
// writes no cache entry. /v1/responses/compact counts its input as
// /v1/responses does (instructions and input, cached tokens by the same
// rule; no input counts the instructions alone) and reports CompactTokens
// (32) output tokens; its answer is {"id":"resp_…","object":
// "response.compaction","created_at","output","usage"}, output being every
// user message of the input ({"type":"message","role":"user"} with its
// content; a string input becomes one input_text) then one
// {"id":"cmp_…","type":"compaction","encrypted_content":"sim-compaction-<hash>"}.
// A /v1/responses call whose input has a compaction_trigger item (Codex
// CLI's remote compaction) answers that compaction item as its only output,
// with the same usage rule; streamed, its events are response.created,
// response.in_progress, response.output_item.added,
// response.output_item.done (the content event for timing and cuts) and
// response.completed.

const (
	countTokensPath = "/v1/messages/count_tokens"
	compactPath     = "/v1/responses/compact"
)

// CompactTokens is the output_tokens of every compaction: the summary the
// compaction item stands for.
const CompactTokens = 32

// countTokens answers POST /v1/messages/count_tokens: {"input_tokens": N},
// N the whole prompt a messages call with the same body counts (cache
// reads, cache writes and plain input together). Nothing is generated,
// cached or kept.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	if !hasVersion(r) {
		badRequest(w, shapeAnthropic, "anthropic-version: header is required")
		return
	}
	sc := getScratch()
	defer putScratch(sc)
	req, ok := readRequest(w, r, sc, shapeAnthropic, countTokensPath, parseCountTokens)
	if !ok {
		return
	}
	p := messagesPrefix(req)
	b := append(sc.out[:0], `{"input_tokens":`...)
	b = appendInt(b, p.total)
	sc.out = append(b, '}')
	writeJSON(w, http.StatusOK, sc.out)
}

// CountTokens returns the input_tokens the sim answers for a count_tokens
// request body.
func CountTokens(body []byte) (int64, error) {
	req, err := parseCountTokens(body)
	if err != nil {
		return 0, usageErr(err, req)
	}
	p := messagesPrefix(req)
	return p.total, nil
}

// compactPlan counts a compact request as a responses request with the
// same instructions and input; the output is CompactTokens.
func compactPlan(req *compactRequest) Counts {
	var c Counts
	if req.Input == nil {
		if req.Instructions != nil {
			c.Prompt = Tokens(*req.Instructions)
		}
		c.Cached = cachedTokens(c.Prompt)
	} else {
		c, _, _ = responsesPlan(&responsesRequest{Model: req.Model, Input: req.Input, Instructions: req.Instructions})
	}
	c.Completion = CompactTokens
	return c
}

// CompactUsage returns the usage the sim reports for a responses compact
// request body.
func CompactUsage(body []byte) (Counts, error) {
	req, err := parseCompact(body)
	if err != nil {
		return Counts{}, usageErr(err, req)
	}
	return compactPlan(req), nil
}

func (r *compactRequest) model() string { return r.Model }

// compact answers POST /v1/responses/compact as upstream does: a
// response.compaction object whose output is every user message of the
// input, then one compaction item whose encrypted_content is opaque (a
// hash of the input: the sim keeps no content), and the usage.
func (s *Server) compact(w http.ResponseWriter, r *http.Request) {
	sc := getScratch()
	defer putScratch(sc)
	req, ok := readRequest(w, r, sc, shapeOpenAI, compactPath, parseCompact)
	if !ok {
		return
	}
	body := sc.body.Bytes()
	c := compactPlan(req)
	var idBuf [48]byte
	b := append(sc.out[:0], `{"id":"`...)
	b = append(b, s.id(idBuf[:0], "resp_")...)
	b = append(b, `","object":"response.compaction","created_at":`...)
	b = appendInt(b, s.now().Unix())
	b = append(b, `,"output":[`...)
	n := 0
	item := func(content func([]byte) []byte) {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"id":"`...)
		b = append(b, s.id(idBuf[:0], "msg_")...)
		b = append(b, `","type":"message","status":"completed","role":"user","content":`...)
		b = content(b)
		b = append(b, '}')
	}
	textContent := func(text string) func([]byte) []byte {
		return func(b []byte) []byte {
			b = append(b, `[{"type":"input_text","text":`...)
			b = appendString(b, text)
			return append(b, `}]`...)
		}
	}
	if req.Input != nil && req.Input.str {
		item(textContent(req.Input.text))
	} else if req.Input != nil {
		// The user messages, their content as sent.
		var raw struct {
			Input []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"input"`
		}
		_ = json.Unmarshal(body, &raw) // parseCompact has read it
		for _, it := range raw.Input {
			ct := bytes.TrimSpace(it.Content)
			if it.Role != "user" || len(ct) == 0 || bytes.Equal(ct, []byte("null")) {
				continue
			}
			if ct[0] == '"' {
				var text string
				_ = json.Unmarshal(ct, &text)
				item(textContent(text))
				continue
			}
			item(func(b []byte) []byte { return append(b, ct...) })
		}
	}
	if n > 0 {
		b = append(b, ',')
	}
	b = append(b, `{"id":"`...)
	b = append(b, s.id(idBuf[:0], "cmp_")...)
	b = append(b, `","type":"compaction","encrypted_content":"sim-compaction-`...)
	b = appendHex(b, fnvBytes(fnvString(fnvOffset, req.Model), body), 16)
	b = append(b, `"}],"usage":`...)
	b = appendResponsesUsage(b, c)
	sc.out = append(b, '}')
	writeJSON(w, http.StatusOK, sc.out)
}
