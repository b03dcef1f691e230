package sim

import (
	"math"
	"net/http"
	"slices"
	"strconv"
)

// # Typed questions
//
// Answers are derived from FNV-1a hashes of state and question name: noul
// {"type":"noul","noul":p}; choice {"type":"choice","choice":o,
// "probabilities":{o:p,…}} (the most probable option); score
// {"type":"score","score":x} within [min, max] (defaults 0 and 1). 422 when
// Tokens(state) > 32768 + Tokens(the longest question instructions)
// ("state is too long: N tokens, limit M"), when a choice question has no
// options (or a duplicate), a score question has min > max, a type is not
// noul, choice or score, questions is empty, or model, state or questions
// is missing.

const systemOnePath = "/v1/systemone"

// Typed-question types.
const (
	QuestionNoul   = "noul"
	QuestionChoice = "choice"
	QuestionScore  = "score"
)

// question is one typed question.
type question struct {
	Type         string   `json:"type"`
	Instructions string   `json:"instructions"`
	Options      []string `json:"options"`
	Min          *float64 `json:"min"`
	Max          *float64 `json:"max"`
}

// systemOneRequest is a typed-question request.
type systemOneRequest struct {
	Model     string              `json:"model"`
	State     *string             `json:"state"`
	Questions map[string]question `json:"questions"`
}

// problem is one entry of a 422 validation detail.
type problem struct {
	Loc  []string `json:"loc"`
	Msg  string   `json:"msg"`
	Type string   `json:"type"`
}

// parseSystemOne decodes a typed-question body; errModel when the model is
// set but is not a typed-question model.
func parseSystemOne(body []byte) (*systemOneRequest, error) {
	var req systemOneRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	if req.Model != "" && !serves(req.Model, famSystemOne) {
		return &req, errModel
	}
	return &req, nil
}

// names returns the question names in sorted order.
func (req *systemOneRequest) names() []string {
	names := make([]string, 0, len(req.Questions))
	for name := range req.Questions {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// validate returns every problem of the request (empty when it is valid).
func (req *systemOneRequest) validate() []problem {
	var ps []problem
	missing := func(field string) {
		ps = append(ps, problem{Loc: []string{"body", field}, Msg: "Field required", Type: "missing"})
	}
	if req.Model == "" {
		missing("model")
	}
	if req.State == nil {
		missing("state")
	}
	if req.Questions == nil {
		missing("questions")
	} else if len(req.Questions) == 0 {
		ps = append(ps, problem{Loc: []string{"body", "questions"},
			Msg: "questions must have at least 1 entry", Type: "value_error"})
	}
	var longest int64
	for _, name := range req.names() {
		q := req.Questions[name]
		loc := func(field string) []string { return []string{"body", "questions", name, field} }
		longest = max(longest, Tokens(q.Instructions))
		switch q.Type {
		case QuestionNoul:
		case QuestionChoice:
			if len(q.Options) == 0 {
				ps = append(ps, problem{Loc: loc("options"),
					Msg: "a choice question needs at least one option", Type: "value_error"})
				break
			}
			seen := make(map[string]bool, len(q.Options))
			for _, o := range q.Options {
				if seen[o] {
					ps = append(ps, problem{Loc: loc("options"),
						Msg: "duplicate option " + strconv.Quote(o), Type: "value_error"})
					break
				}
				seen[o] = true
			}
		case QuestionScore:
			lo, hi := q.bounds()
			if lo > hi {
				ps = append(ps, problem{Loc: loc("max"),
					Msg: "max must not be less than min", Type: "value_error"})
			}
		case "":
			ps = append(ps, problem{Loc: loc("type"), Msg: "Field required", Type: "missing"})
		default:
			ps = append(ps, problem{Loc: loc("type"),
				Msg: "type must be one of noul, choice, score; got " + strconv.Quote(q.Type), Type: "value_error"})
		}
	}
	if req.State != nil {
		n, limit := Tokens(*req.State), StateTokenLimit+longest
		if n > limit {
			ps = append(ps, problem{Loc: []string{"body", "state"},
				Msg:  "state is too long: " + strconv.FormatInt(n, 10) + " tokens, limit " + strconv.FormatInt(limit, 10),
				Type: "value_error"})
		}
	}
	return ps
}

// bounds returns a score question's range: min defaults to 0, max to 1.
func (q *question) bounds() (lo, hi float64) {
	lo, hi = 0, 1
	if q.Min != nil {
		lo = *q.Min
	}
	if q.Max != nil {
		hi = *q.Max
	}
	return lo, hi
}

// inputTokens is Tokens(state) plus, per question, Tokens(name) +
// Tokens(instructions) + Tokens(each option).
func (req *systemOneRequest) inputTokens() int64 {
	var n int64
	if req.State != nil {
		n = Tokens(*req.State)
	}
	for name, q := range req.Questions {
		n += Tokens(name) + Tokens(q.Instructions)
		for _, o := range q.Options {
			n += Tokens(o)
		}
	}
	return n
}

// unit maps a hash to [0, 1] in steps of 1/10000.
func unit(h uint64) float64 { return float64(h%10001) / 10000 }

func round4(x float64) float64 { return math.Round(x*10000) / 10000 }

// answer is the deterministic answer to question name about state.
func answer(state, name string, q *question) map[string]any {
	h := fnvString(fnvByte(fnvString(fnvOffset, state), 0), name)
	switch q.Type {
	case QuestionChoice:
		weights := make([]float64, len(q.Options))
		var sum float64
		for i, o := range q.Options {
			weights[i] = float64(1 + fnvString(fnvByte(h, 0), o)%1000)
			sum += weights[i]
		}
		probs := make(map[string]float64, len(q.Options))
		best := 0
		for i, o := range q.Options {
			probs[o] = round4(weights[i] / sum)
			if weights[i] > weights[best] {
				best = i
			}
		}
		return map[string]any{"type": QuestionChoice, "choice": q.Options[best], "probabilities": probs}
	case QuestionScore:
		lo, hi := q.bounds()
		return map[string]any{"type": QuestionScore, "score": round4(lo + (hi-lo)*unit(h))}
	}
	return map[string]any{"type": QuestionNoul, "noul": unit(h)}
}

// systemOne answers POST /v1/systemone and /v1/system_one.
func (s *Server) systemOne(w http.ResponseWriter, r *http.Request) {
	sc := getScratch()
	defer putScratch(sc)
	req, ok := readRequest(w, r, sc, shapeOpenAI, systemOnePath, parseSystemOne)
	if !ok {
		return
	}
	if ps := req.validate(); len(ps) > 0 {
		writeValue(w, http.StatusUnprocessableEntity, map[string]any{"detail": ps})
		return
	}
	answers := make(map[string]any, len(req.Questions))
	for name, q := range req.Questions {
		answers[name] = answer(*req.State, name, &q)
	}
	writeValue(w, http.StatusOK, map[string]any{
		"model":   req.Model,
		"answers": answers,
		"usage":   map[string]int64{"input_tokens": req.inputTokens(), "output_tokens": 0},
	})
}
