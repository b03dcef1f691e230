package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

// FuzzParams: whatever params arrive (one per line, "name=value"; a "\x1f"
// may appear anywhere), parseParams never panics, fails only with a 400
// naming questions, a questions.<name> field or state, or with an internal
// error, and on success returns at least one question, each valid for its
// type, and a state within the limit.
func FuzzParams(f *testing.F) {
	seed := func(b pb) []byte {
		var out []byte
		for _, p := range b {
			out = append(out, p.Name...)
			out = append(out, '=')
			out = append(out, p.Value...)
			out = append(out, '\n')
		}
		return out
	}
	f.Add(seed(state(10).q("q", "type=noul")))
	f.Add(seed(state(32780).q("a", "type=score", "min=1", "max=2e0", "instructions_tokens=12").q("b", "type=choice", "options=3")))
	f.Add(seed(state(1).q("a\x1fb", "type=noul").q("a", "type=choice", "options=1")))
	f.Add(seed(state(99999).q("s", "type=score", "min=-0", "max=0.0")))
	f.Add([]byte("question=x\nquestion.type=y\x1fnoul\nstate_tokens=\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var list []abi.Param
		for _, line := range bytes.Split(data, []byte("\n")) {
			name, value, _ := bytes.Cut(line, []byte("="))
			list = append(list, abi.Param{Name: string(name), Value: string(value)})
		}
		r, err := parseParams(list)
		if err != nil {
			switch {
			case err.Message == "":
				t.Fatalf("error without a message: %+v", err)
			case err.Code == abi.CodeInternal && err.Field == "":
			case err.Code == abi.CodeInvalid && (err.Field == "questions" || err.Field == "state" || strings.HasPrefix(err.Field, "questions.")):
			default:
				t.Fatalf("error %+v", err)
			}
			return
		}
		if len(r.questions) == 0 || r.stateTokens > r.limit || r.limit < stateTokenLimit {
			t.Fatalf("accepted %+v", r)
		}
		for _, q := range r.questions {
			switch q.typ {
			case typeNoul:
			case typeChoice:
				if q.options < 2 {
					t.Fatalf("choice with %d options accepted", q.options)
				}
			case typeScore:
				lo, okLo := parseNumber(q.min)
				hi, okHi := parseNumber(q.max)
				if q.hasField(fieldMin) && !okLo || q.hasField(fieldMax) && !okHi || okLo && okHi && compare(lo, hi) >= 0 {
					t.Fatalf("score %q..%q accepted", q.min, q.max)
				}
				if okLo && okHi {
					a, _ := strconv.ParseFloat(q.min, 64)
					b, _ := strconv.ParseFloat(q.max, 64)
					if a > b {
						t.Fatalf("score %q..%q accepted though min > max as floats", q.min, q.max)
					}
				}
			default:
				t.Fatalf("type %q accepted", q.typ)
			}
			if r.limit < stateTokenLimit+q.instructionsTokens {
				t.Fatalf("limit %d below question %q's instructions", r.limit, q.name)
			}
		}
	})
}
