package xlate

import "encoding/json"

// gemParseAnswer reads a generateContent answer. Its first candidate's
// parts are walked as a stream's are (gemDecoder.parts) and gathered into
// Parts; a prompt blocked before any candidate is an answer with no parts
// that finished content_filter. A body that is no GenerateContentResponse
// (no candidates, no promptFeedback), or Google's error object, is
// malformed: the gateway handles non-2xx answers before translating.
func gemParseAnswer(body []byte) (*Answer, error) {
	var w gemResponseWire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, gemDecodeError("generateContent answer", err)
	}
	if w.Error != nil {
		return nil, malformed("generateContent answer is an error (status %q)", w.Error.Status)
	}
	if len(w.Candidates) == 0 && w.PromptFeedback == nil {
		return nil, malformed("generateContent answer has neither candidates nor promptFeedback")
	}
	a := &Answer{ID: w.ResponseID, Model: w.ModelVersion}
	if len(w.Candidates) == 0 {
		a.Finish = FinishContentFilter
	} else {
		c := &w.Candidates[0]
		var d gemDecoder
		if c.Content != nil {
			if err := d.parts(c.Content.Parts, gemCollector(a)); err != nil {
				return nil, err
			}
		}
		a.Finish = gemFinish(c.FinishReason, d.calls > 0)
	}
	if w.UsageMetadata != nil {
		u, err := w.UsageMetadata.usage()
		if err != nil {
			return nil, err
		}
		a.Usage, a.HasUsage = u, true
	}
	return a, nil
}

// gemCollector gathers the block events of gemDecoder.parts into a.Parts:
// a block is a part, its deltas its text (a tool call's arguments), its
// signature (a tool call's: its start's Text) the part's Signature.
func gemCollector(a *Answer) func(*Event) {
	return func(ev *Event) { gemCollect(a, ev) }
}

func gemCollect(a *Answer, ev *Event) {
	switch ev.Kind {
	case EvBlockStart:
		p := Part{Type: ev.Part, ID: ev.ID, Name: ev.Name}
		if ev.Part == ToolCall {
			p.Signature = ev.Text
		}
		a.Parts = append(a.Parts, p)
	case EvDelta:
		p := &a.Parts[len(a.Parts)-1]
		if p.Type == ToolCall {
			p.Arguments += ev.Text
		} else {
			p.Text += ev.Text
		}
	case EvSignature:
		a.Parts[len(a.Parts)-1].Signature = ev.Text
	}
}
