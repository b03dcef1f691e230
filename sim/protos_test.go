package sim

import (
	"encoding/json"
	"strings"
	"testing"
)

var responsesProto = lProto{
	name: "responses", model: "modelb-6-astra",
	path: func(bool) string { return "/v1/responses" },
	body: func(conv []lTurn, stream bool, extra map[string]any) []byte {
		var items []any
		for _, tn := range conv {
			switch tn.role {
			case "user":
				items = append(items, map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": tn.text}}})
			case "assistant":
				if tn.a.rsID != "" {
					items = append(items, map[string]any{"type": "reasoning", "id": tn.a.rsID, "summary": []any{map[string]any{"type": "summary_text", "text": tn.a.think}}, "encrypted_content": tn.a.sig})
				}
				items = append(items, map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": tn.a.text}}})
				for _, c := range tn.a.calls {
					items = append(items, map[string]any{"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.args})
				}
			case "results":
				for _, r := range tn.res {
					items = append(items, map[string]any{"type": "function_call_output", "call_id": r.id, "output": r.args})
				}
			}
		}
		var tools []any
		for _, n := range loopTools {
			tools = append(tools, map[string]any{"type": "function", "name": n, "parameters": map[string]any{"type": "object"}})
		}
		return withExtra(map[string]any{"model": "modelb-6-astra", "input": items, "tools": tools, "stream": stream, "store": false}, extra)
	},
	parseJSON: func(t *testing.T, b []byte) lAnswer { return decode[respAnswer](t, b).answer(t) },
	parseSSE: func(t *testing.T, evs []sseEvent) lAnswer {
		t.Helper()
		var a lAnswer
		for _, ev := range evs {
			switch ev.name {
			case "response.function_call_arguments.delta":
				a.argPieces++
			case "response.output_item.added":
				if strings.Contains(ev.data, `"type":"function_call"`) {
					a.starts++
				}
			case "response.completed", "response.incomplete":
				r := decode[struct {
					Response respAnswer `json:"response"`
				}](t, []byte(ev.data)).Response.answer(t)
				r.argPieces, r.starts = a.argPieces, a.starts
				return r
			}
		}
		t.Fatal("no response.completed")
		return a
	},
	usage:      ResponsesUsage,
	think:      map[string]any{"reasoning": map[string]any{"effort": "low"}, "include": []string{"reasoning.encrypted_content"}},
	idPrefix:   "call_",
	callFinish: "completed", stopFinish: "completed",
}

// respAnswer is a response object as the loop reads it.
type respAnswer struct {
	Status string `json:"status"`
	Output []struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Enc       string `json:"encrypted_content"`
		Summary   []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"summary"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Usage struct {
		InputTokens        int64 `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int64 `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	} `json:"usage"`
}

func (r respAnswer) answer(t *testing.T) lAnswer {
	t.Helper()
	a := lAnswer{finish: r.Status, prompt: r.Usage.InputTokens, cached: r.Usage.InputTokensDetails.CachedTokens,
		output: r.Usage.OutputTokens, reasoning: r.Usage.OutputTokensDetails.ReasoningTokens}
	for _, it := range r.Output {
		switch it.Type {
		case "reasoning":
			if len(it.Summary) != 1 || it.Summary[0].Type != "summary_text" || !strings.HasPrefix(it.ID, "rs_") {
				t.Fatalf("reasoning item %+v", it)
			}
			a.think, a.sig, a.rsID = it.Summary[0].Text, it.Enc, it.ID
		case "message":
			a.text = it.Content[0].Text
		case "function_call":
			if !strings.HasPrefix(it.ID, "fc_") || it.ID[3:] != strings.TrimPrefix(it.CallID, "call_") {
				t.Fatalf("function_call ids %q %q", it.ID, it.CallID)
			}
			a.calls = append(a.calls, lCall{id: it.CallID, name: it.Name, args: it.Arguments})
		default:
			t.Fatalf("output item type %q", it.Type)
		}
	}
	return a
}

var geminiProto = lProto{
	name: "gemini", model: "modelf-v4-pro",
	path: func(stream bool) string {
		if stream {
			return "/v1beta/models/modelf-v4-pro:streamGenerateContent?alt=sse"
		}
		return "/v1beta/models/modelf-v4-pro:generateContent"
	},
	body: func(conv []lTurn, _ bool, extra map[string]any) []byte {
		var contents []any
		for _, tn := range conv {
			switch tn.role {
			case "user":
				contents = append(contents, map[string]any{"role": "user", "parts": []any{map[string]any{"text": tn.text}}})
			case "assistant":
				contents = append(contents, map[string]any{"role": "model", "parts": geminiParts(tn.a)})
			case "results":
				var parts []any
				for _, r := range tn.res {
					fr := map[string]any{"name": r.name, "response": map[string]any{"result": r.args}}
					if r.id != "" {
						fr["id"] = r.id
					}
					parts = append(parts, map[string]any{"functionResponse": fr})
				}
				contents = append(contents, map[string]any{"role": "user", "parts": parts})
			}
		}
		var decls []any
		for _, n := range loopTools {
			decls = append(decls, map[string]any{"name": n, "parametersJsonSchema": map[string]any{"type": "object"}})
		}
		return withExtra(map[string]any{"contents": contents, "tools": []any{map[string]any{"functionDeclarations": decls}}}, extra)
	},
	parseJSON: func(t *testing.T, b []byte) lAnswer {
		var a lAnswer
		a.addGemini(t, decode[geminiChunk](t, b))
		return a
	},
	parseSSE: func(t *testing.T, evs []sseEvent) lAnswer {
		t.Helper()
		var a lAnswer
		for i, ev := range evs {
			if ev.name != "" || ev.data == "[DONE]" {
				t.Fatalf("event %d: %+v", i, ev)
			}
			c := decode[geminiChunk](t, []byte(ev.data))
			if (c.UsageMetadata != nil) != (i == len(evs)-1) {
				t.Fatalf("usageMetadata on chunk %d of %d", i, len(evs))
			}
			a.addGemini(t, c)
		}
		return a
	},
	usage:      GeminiUsage,
	think:      map[string]any{"generationConfig": map[string]any{"thinkingConfig": map[string]any{"includeThoughts": true, "thinkingBudget": 1024}}},
	idPrefix:   "",
	callFinish: "STOP", stopFinish: "STOP",
	separateMind: true,
}

// geminiParts writes an answer back as the parts of a model content.
func geminiParts(a lAnswer) []any {
	var parts []any
	withSig := func(p map[string]any, sig string) map[string]any {
		if sig != "" {
			p["thoughtSignature"] = sig
		}
		return p
	}
	if a.think != "" {
		parts = append(parts, withSig(map[string]any{"text": a.think, "thought": true}, a.sig))
	}
	parts = append(parts, withSig(map[string]any{"text": a.text}, a.textSig))
	for _, c := range a.calls {
		fc := map[string]any{"name": c.name, "args": json.RawMessage(c.args)}
		if c.id != "" {
			fc["id"] = c.id
		}
		parts = append(parts, withSig(map[string]any{"functionCall": fc}, c.sig))
	}
	return parts
}

type geminiChunk struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         *string `json:"text"`
				Thought      bool    `json:"thought"`
				Sig          string  `json:"thoughtSignature"`
				FunctionCall *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
		Index        *int   `json:"index"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount        int64  `json:"promptTokenCount"`
		CandidatesTokenCount    int64  `json:"candidatesTokenCount"`
		TotalTokenCount         int64  `json:"totalTokenCount"`
		CachedContentTokenCount *int64 `json:"cachedContentTokenCount"`
		ThoughtsTokenCount      *int64 `json:"thoughtsTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
	ResponseID   string `json:"responseId"`
}

// addGemini adds a chunk (or the whole answer) to a.
func (a *lAnswer) addGemini(t *testing.T, c geminiChunk) {
	t.Helper()
	if len(c.Candidates) != 1 || c.Candidates[0].Content.Role != "model" || c.Candidates[0].Index == nil || c.ModelVersion == "" || c.ResponseID == "" {
		t.Fatalf("gemini envelope %+v", c)
	}
	cd := c.Candidates[0]
	for _, p := range cd.Content.Parts {
		switch {
		case p.FunctionCall != nil:
			a.calls = append(a.calls, lCall{id: p.FunctionCall.ID, name: p.FunctionCall.Name, args: string(p.FunctionCall.Args), sig: p.Sig})
			a.starts++
		case p.Thought:
			a.think += deref(p.Text)
			a.sig = p.Sig
		case p.Text != nil:
			a.text += *p.Text
			if p.Sig != "" {
				a.textSig = p.Sig
			}
		}
	}
	if cd.FinishReason != "" {
		a.finish = cd.FinishReason
	}
	if u := c.UsageMetadata; u != nil {
		a.prompt, a.output = u.PromptTokenCount, u.CandidatesTokenCount
		if u.CachedContentTokenCount != nil {
			a.cached = *u.CachedContentTokenCount
		}
		if u.ThoughtsTokenCount != nil {
			a.reasoning = *u.ThoughtsTokenCount
		}
		if u.TotalTokenCount != a.prompt+a.output+a.reasoning {
			t.Fatalf("totalTokenCount %d is not the sum of %+v", u.TotalTokenCount, *u)
		}
	}
}
