package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

// pb builds params as the gateway sends them.
type pb []abi.Param

// state starts a param list with state_tokens n.
func state(n int64) pb { return pb{{Name: "state_tokens", Value: strconv.FormatInt(n, 10)}} }

// q appends a question and its fields, each "field=value".
func (b pb) q(name string, fields ...string) pb {
	b = append(b, abi.Param{Name: "question", Value: name})
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		b = append(b, abi.Param{Name: "question." + k, Value: name + "\x1f" + v})
	}
	return b
}

func (b pb) with(name, value string) pb { return append(b, abi.Param{Name: name, Value: value}) }

func TestParseParams(t *testing.T) {
	tests := []struct {
		name   string
		params []abi.Param
		limit  int64  // the state limit of a valid request
		code   string // the error code; "" when valid
		field  string // the field of a 400
		msg    string // a substring of the message
	}{
		{name: "one noul", params: state(10).q("shipped", "type=noul"), limit: 32768},
		{name: "choice with 2 options", params: state(10).q("c", "type=choice", "options=2"), limit: 32768},
		{name: "score without bounds", params: state(10).q("s", "type=score"), limit: 32768},
		{name: "score with min only", params: state(10).q("s", "type=score", "min=5"), limit: 32768},
		{name: "score 0 to 10", params: state(10).q("s", "type=score", "min=0", "max=10"), limit: 32768},
		{name: "score -1.5 to -1.25", params: state(10).q("s", "type=score", "min=-1.5", "max=-1.25"), limit: 32768},
		{name: "score 1e2 to 100.5", params: state(10).q("s", "type=score", "min=1e2", "max=100.5"), limit: 32768},
		{name: "options and bounds ignored off their type", params: state(10).q("n", "type=noul", "options=0", "min=x", "max=y"), limit: 32768},
		{name: "unknown field ignored", params: state(10).q("n", "type=noul", "weight=3"), limit: 32768},
		{name: "unknown param ignored", params: state(10).q("n", "type=noul").with("stream", "true"), limit: 32768},
		// The limit is 32768 plus the largest instructions_tokens of any question.
		{name: "state at the limit", params: state(32768).q("n", "type=noul"), limit: 32768},
		{name: "state at the raised limit", params: state(32780).q("a", "type=noul", "instructions_tokens=5").q("b", "type=noul", "instructions_tokens=12"), limit: 32780},
		{name: "fields after every question", params: pb{
			{Name: "question", Value: "a"}, {Name: "question", Value: "b"},
			{Name: "question.type", Value: "a\x1fnoul"}, {Name: "question.type", Value: "b\x1fscore"},
			{Name: "state_tokens", Value: "7"}}, limit: 32768},
		{name: "separator inside a name", params: state(1).q("a\x1fb", "type=noul").q("a", "type=choice", "options=3"), limit: 32768},
		{name: "empty name", params: state(1).q("", "type=noul"), limit: 32768},

		{name: "no questions", params: state(10), code: abi.CodeInvalid, field: "questions", msg: "at least one entry"},
		{name: "type missing", params: state(10).q("q1"), code: abi.CodeInvalid, field: "questions.q1.type", msg: `question "q1": type is required, one of noul, choice, score`},
		{name: "type unknown", params: state(10).q("q1", "type=yesno"), code: abi.CodeInvalid, field: "questions.q1.type", msg: `type must be one of noul, choice, score (got "yesno")`},
		{name: "type case", params: state(10).q("q1", "type=Noul"), code: abi.CodeInvalid, field: "questions.q1.type", msg: "must be one of"},
		{name: "choice without options", params: state(10).q("c", "type=choice"), code: abi.CodeInvalid, field: "questions.c.options", msg: "a choice question needs at least 2 options (got 0)"},
		{name: "choice with 1 option", params: state(10).q("c", "type=choice", "options=1"), code: abi.CodeInvalid, field: "questions.c.options", msg: "(got 1)"},
		{name: "score min equals max", params: state(10).q("s", "type=score", "min=1", "max=1.0"), code: abi.CodeInvalid, field: "questions.s.min", msg: `min must be less than max (got min "1", max "1.0")`},
		{name: "score min above max", params: state(10).q("s", "type=score", "min=10", "max=-10"), code: abi.CodeInvalid, field: "questions.s.min", msg: "less than max"},
		{name: "score min not a number", params: state(10).q("s", "type=score", "min=low", "max=1"), code: abi.CodeInvalid, field: "questions.s.min", msg: `min must be a number (got "low")`},
		{name: "score max quoted", params: state(10).q("s", "type=score", "max=\"1\""), code: abi.CodeInvalid, field: "questions.s.max", msg: "max must be a number"},
		{name: "score max empty", params: state(10).q("s", "type=score", "max="), code: abi.CodeInvalid, field: "questions.s.max", msg: "max must be a number"},
		{name: "state one above the limit", params: state(32769).q("n", "type=noul"), code: abi.CodeInvalid, field: "state",
			msg: "state is too long: about 32769 tokens by the conservative estimate of one token per 3 bytes, above the limit of 32768 tokens (32768 plus 0 for the longest question's instructions)"},
		{name: "state above the raised limit", params: state(32781).q("n", "type=noul", "instructions_tokens=12"), code: abi.CodeInvalid, field: "state", msg: "above the limit of 32780 tokens (32768 plus 12"},
		{name: "question twice", params: state(1).q("a", "type=noul").q("a", "type=noul"), code: abi.CodeInvalid, field: "questions.a", msg: `question "a" is given more than once`},
		{name: "field twice", params: state(1).q("a", "type=noul", "type=score"), code: abi.CodeInvalid, field: "questions.a.type", msg: "type is given more than once"},
		// Questions are checked in name order, whatever order they came in.
		{name: "first bad question by name", params: state(1).q("z", "type=bad").q("b", "type=choice"), code: abi.CodeInvalid, field: "questions.b.options"},
		{name: "questions before state", params: state(99999).q("b", "type=bad"), code: abi.CodeInvalid, field: "questions.b.type"},

		{name: "no state_tokens", params: pb{}.q("n", "type=noul"), code: abi.CodeInternal, msg: "the host sent no state_tokens"},
		{name: "state_tokens twice", params: state(1).with("state_tokens", "1").q("n", "type=noul"), code: abi.CodeInternal, msg: "state_tokens more than once"},
		{name: "state_tokens negative", params: pb{{Name: "state_tokens", Value: "-1"}}.q("n", "type=noul"), code: abi.CodeInternal, msg: "not a non-negative integer"},
		{name: "state_tokens overflows", params: pb{{Name: "state_tokens", Value: "99999999999999999999"}}.q("n", "type=noul"), code: abi.CodeInternal, msg: "not a non-negative integer"},
		{name: "options not a count", params: state(1).q("c", "type=choice", "options=two"), code: abi.CodeInternal, msg: `question.options of question "c" is not a non-negative integer ("two")`},
		{name: "instructions not a count", params: state(1).q("c", "type=noul", "instructions_tokens=-4"), code: abi.CodeInternal, msg: "not a non-negative integer"},
		{name: "field of no question", params: state(1).q("a", "type=noul").with("question.type", "b\x1fnoul"), code: abi.CodeInternal, msg: "the host's param question.type names no question"},
		{name: "field without separator", params: state(1).q("a", "type=noul").with("question.min", "a"), code: abi.CodeInternal, msg: "names no question"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parseParams(tt.params)
			if tt.code == "" {
				if err != nil || r.limit != tt.limit {
					t.Fatalf("parseParams = %+v, %+v; want limit %d", r, err, tt.limit)
				}
				return
			}
			if err == nil || err.Code != tt.code || err.Field != tt.field || !strings.Contains(err.Message, tt.msg) {
				t.Fatalf("parseParams error = %+v, want %s field %q with %q", err, tt.code, tt.field, tt.msg)
			}
		})
	}
}

// The fields land on the right question, however they are laid out.
func TestParseParamsOwners(t *testing.T) {
	r, err := parseParams(state(3).q("a\x1fb", "type=score", "min=1", "max=2", "instructions_tokens=9").q("a", "type=choice", "options=4"))
	if err != nil {
		t.Fatal(err)
	}
	want := []question{
		{name: "a", typ: "choice", options: 4, has: [5]bool{true, true}},
		{name: "a\x1fb", typ: "score", min: "1", max: "2", instructionsTokens: 9, has: [5]bool{true, false, true, true, true}},
	}
	if len(r.questions) != 2 || r.questions[0] != want[0] || r.questions[1] != want[1] || r.stateTokens != 3 || r.limit != 32777 {
		t.Fatalf("parseParams = %+v", r)
	}
}
