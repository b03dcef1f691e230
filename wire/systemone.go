package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"strconv"

	"github.com/modelrelay/modelrelay/internal/clip"
)

// systemOneRequest is a typed-question request (docs/api.md#what-the-gateway-reads-of-a-request).
type systemOneRequest struct {
	Model     *string                     `json:"model"`
	State     *string                     `json:"state"`
	Questions *map[string]json.RawMessage `json:"questions"`
}

type systemOneQuestion struct {
	Type         *string         `json:"type"`
	Instructions *string         `json:"instructions"`
	Options      *[]string       `json:"options"`
	Min          json.RawMessage `json:"min"`
	Max          json.RawMessage `json:"max"`
}

// stateTokens is the conservative estimate of a text's tokens used against
// the state limit: one token per three bytes, rounded up (tokenizers average
// three to four bytes per token, so this over-counts rather than under).
func stateTokens(n int) int64 { return int64((n + 2) / 3) }

// DecodeSystemOne reads a typed-question request: model, state and at
// least one question (each an object with a type) are required. Its params
// are the state's estimated tokens and, per question in name order, its
// name, type, instructions' estimated tokens, option count, min and max.
func DecodeSystemOne(body []byte) (*Summary, error) {
	var req systemOneRequest
	if e := decodeObject(body, &req); e != nil {
		return nil, e
	}
	model, e := requireModel(req.Model)
	if e != nil {
		return nil, e
	}
	if req.State == nil {
		return nil, badRequest("state", "state is required (the text the questions are about)")
	}
	if req.Questions == nil {
		return nil, badRequest("questions", "questions is required: an object of named questions")
	}
	if len(*req.Questions) == 0 {
		return nil, badRequest("questions", "questions must have at least one entry")
	}
	s := &Summary{Model: model}
	s.Params = addParam(s.Params, "state_tokens", itoa(stateTokens(len(*req.State))))
	names := make([]string, 0, len(*req.Questions))
	for n := range *req.Questions {
		names = append(names, n)
	}
	sort.Strings(names)
	const sep = "\x1f"
	for _, name := range names {
		f := "questions." + name
		raw := bytes.TrimSpace((*req.Questions)[name])
		if len(raw) == 0 || raw[0] != '{' {
			return nil, badRequest(f, "%s must be a question object", clip.FieldPath(f))
		}
		var q systemOneQuestion
		if err := json.Unmarshal(raw, &q); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, badRequest(f+"."+te.Field, "%s: expected %s", clip.FieldPath(f+"."+te.Field), jsonKind(te.Type.Kind().String()))
			}
			return nil, badRequest(f, "%s: %s", clip.FieldPath(f), clip.Text(err.Error(), clip.MaxMessage))
		}
		if q.Type == nil {
			return nil, badRequest(f+".type", "%s is required (noul, choice or score)", clip.FieldPath(f+".type"))
		}
		s.Params = addParam(s.Params, "question", name)
		s.Params = addParam(s.Params, "question.type", name+sep+*q.Type)
		if q.Instructions != nil {
			s.Params = addParam(s.Params, "question.instructions_tokens", name+sep+itoa(stateTokens(len(*q.Instructions))))
		}
		if q.Options != nil {
			s.Params = addParam(s.Params, "question.options", name+sep+itoa(int64(len(*q.Options))))
		}
		for _, b := range []struct {
			key string
			raw json.RawMessage
		}{{"min", q.Min}, {"max", q.Max}} {
			if len(b.raw) == 0 || bytes.Equal(bytes.TrimSpace(b.raw), []byte("null")) {
				continue
			}
			v, e := numberText(f+"."+b.key, b.raw)
			if e != nil {
				return nil, e
			}
			s.Params = addParam(s.Params, "question."+b.key, name+sep+v)
		}
	}
	return s, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
