package main

import (
	"slices"
	"strings"

	"github.com/modelrelay/modelrelay/plugins/internal/param"
	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// Params the gateway derives from a typed-question request.
//
//   - state_tokens: the host's conservative estimate of the state's tokens,
//     ceil(len(state bytes) / 3).
//   - question: one per question, Value = the question's name.
//   - question.type, question.options, question.min, question.max,
//     question.instructions_tokens: the question's fields, each Value =
//     "<name>\x1f<value>": type as sent, options as the count of options,
//     min and max as JSON number text, instructions_tokens =
//     ceil(len(instructions) / 3). A field the question does not have is
//     absent.
const (
	paramStateTokens = "state_tokens"
	paramQuestion    = "question"
	fieldPrefix      = "question."
	unitSeparator    = "\x1f"

	fieldType         = "type"
	fieldOptions      = "options"
	fieldMin          = "min"
	fieldMax          = "max"
	fieldInstructions = "instructions_tokens"
)

// stateTokenLimit is the state's token budget before the longest question's
// instructions are added (docs/api.md#limits: 32k tokens plus the longest question).
const stateTokenLimit = 32768

// Question types.
const (
	typeNoul   = "noul"
	typeChoice = "choice"
	typeScore  = "score"
)

var types = []string{typeNoul, typeChoice, typeScore}

// minChoiceOptions is the fewest options a choice question may have.
const minChoiceOptions = 2

// question is one question's fields as the params give them.
type question struct {
	name               string
	typ                string
	options            int64
	min, max           string // JSON number text
	instructionsTokens int64
	has                [5]bool // by field index (fieldIndex)
}

func fieldIndex(field string) int {
	switch field {
	case fieldType:
		return 0
	case fieldOptions:
		return 1
	case fieldMin:
		return 2
	case fieldMax:
		return 3
	case fieldInstructions:
		return 4
	}
	return -1
}

func (q *question) hasField(field string) bool { return q.has[fieldIndex(field)] }

// request is what the params say: the state's size and the questions,
// ordered by name.
type request struct {
	stateTokens int64
	questions   []question
	limit       int64 // stateTokenLimit + the largest instructions_tokens
}

// parseParams reads and validates params. A problem of the request is a
// 400 naming the field (questions, questions.<name>.<field>, or state); a
// param the host could not have produced (a malformed count, a field that
// names no question, no state_tokens) is an internal error. Params this
// plugin does not know are ignored. Questions are checked in name order, so
// the error reported does not depend on the order the host sent them in.
func parseParams(params []abi.Param) (request, *abi.Error) {
	var (
		r          request
		index      = map[string]int{}
		hasState   bool
		current    = -1 // the question the last "question" param declared
		unresolved []abi.Param
	)
	for _, prm := range params {
		switch {
		case prm.Name == paramQuestion:
			if _, dup := index[prm.Value]; dup {
				return request{}, sdk.Invalid(questionField(prm.Value, ""), "question %s is given more than once", sdk.QuoteValue(prm.Value))
			}
			current = len(r.questions)
			index[prm.Value] = current
			r.questions = append(r.questions, question{name: prm.Value})
		case prm.Name == paramStateTokens:
			if hasState {
				return request{}, sdk.Internal("the host sent %s more than once", paramStateTokens)
			}
			n, ok := param.ParseCount(prm.Value)
			if !ok {
				return request{}, sdk.Internal("the host's %s is not a non-negative integer (%s)", paramStateTokens, sdk.QuoteValue(prm.Value))
			}
			r.stateTokens, hasState = n, true
		case strings.HasPrefix(prm.Name, fieldPrefix):
			// A field normally follows its question; one that does not is
			// resolved once every question is known.
			if current >= 0 && strings.HasPrefix(prm.Value, r.questions[current].name+unitSeparator) {
				if aerr := r.questions[current].set(prm); aerr != nil {
					return request{}, aerr
				}
			} else {
				unresolved = append(unresolved, prm)
			}
		}
	}
	for _, prm := range unresolved {
		i, ok := owner(r.questions, prm.Value)
		if !ok {
			return request{}, sdk.Internal("the host's param %s names no question", prm.Name)
		}
		if aerr := r.questions[i].set(prm); aerr != nil {
			return request{}, aerr
		}
	}
	if len(r.questions) == 0 {
		return request{}, sdk.Invalid("questions", "questions must have at least one entry")
	}
	if !hasState {
		return request{}, sdk.Internal("the host sent no %s", paramStateTokens)
	}
	slices.SortFunc(r.questions, func(a, b question) int { return strings.Compare(a.name, b.name) })
	var longest int64
	for i := range r.questions {
		q := &r.questions[i]
		if aerr := q.validate(); aerr != nil {
			return request{}, aerr
		}
		longest = max(longest, q.instructionsTokens)
	}
	r.limit = stateTokenLimit + longest
	if r.stateTokens > r.limit {
		return request{}, sdk.Invalid("state", "state is too long: about %d tokens by the conservative estimate of one token per 3 bytes, above the limit of %d tokens (%d plus %d for the longest question's instructions)",
			r.stateTokens, r.limit, stateTokenLimit, longest)
	}
	return r, nil
}

// owner finds the question a field's value "<name>\x1f<value>" belongs to:
// the longest question name that, with the separator, prefixes it (names
// may themselves hold the separator).
func owner(questions []question, value string) (int, bool) {
	best := -1
	for i, q := range questions {
		if strings.HasPrefix(value, q.name+unitSeparator) && (best < 0 || len(q.name) > len(questions[best].name)) {
			best = i
		}
	}
	return best, best >= 0
}

// set records the field param prm, whose value starts with q's name and the
// separator.
func (q *question) set(prm abi.Param) *abi.Error {
	field := strings.TrimPrefix(prm.Name, fieldPrefix)
	value := prm.Value[len(q.name)+len(unitSeparator):]
	i := fieldIndex(field)
	if i < 0 {
		return nil // a field this plugin does not price or check
	}
	if q.has[i] {
		return sdk.Invalid(questionField(q.name, field), "question %s: %s is given more than once", sdk.QuoteValue(q.name), field)
	}
	q.has[i] = true
	switch field {
	case fieldType:
		q.typ = value
	case fieldMin:
		q.min = value
	case fieldMax:
		q.max = value
	case fieldOptions, fieldInstructions:
		n, ok := param.ParseCount(value)
		if !ok {
			return sdk.Internal("the host's %s of question %s is not a non-negative integer (%s)", prm.Name, sdk.QuoteValue(q.name), sdk.QuoteValue(value))
		}
		if field == fieldOptions {
			q.options = n
		} else {
			q.instructionsTokens = n
		}
	}
	return nil
}

// validate applies the rules of q's type.
func (q *question) validate() *abi.Error {
	switch {
	case !q.hasField(fieldType):
		return sdk.Invalid(questionField(q.name, fieldType), "question %s: type is required, one of %s", sdk.QuoteValue(q.name), strings.Join(types, ", "))
	case !slices.Contains(types, q.typ):
		return sdk.Invalid(questionField(q.name, fieldType), "question %s: type must be one of %s (got %s)", sdk.QuoteValue(q.name), strings.Join(types, ", "), sdk.QuoteValue(q.typ))
	case q.typ == typeChoice && q.options < minChoiceOptions:
		return sdk.Invalid(questionField(q.name, fieldOptions), "question %s: a choice question needs at least %d options (got %d)", sdk.QuoteValue(q.name), minChoiceOptions, q.options)
	case q.typ == typeScore:
		lo, hasLo := parseNumber(q.min)
		hi, hasHi := parseNumber(q.max)
		switch {
		case q.hasField(fieldMin) && !hasLo:
			return sdk.Invalid(questionField(q.name, fieldMin), "question %s: min must be a number (got %s)", sdk.QuoteValue(q.name), sdk.QuoteValue(q.min))
		case q.hasField(fieldMax) && !hasHi:
			return sdk.Invalid(questionField(q.name, fieldMax), "question %s: max must be a number (got %s)", sdk.QuoteValue(q.name), sdk.QuoteValue(q.max))
		case hasLo && hasHi && compare(lo, hi) >= 0:
			return sdk.Invalid(questionField(q.name, fieldMin), "question %s: min must be less than max (got min %s, max %s)", sdk.QuoteValue(q.name), sdk.QuoteValue(q.min), sdk.QuoteValue(q.max))
		}
	}
	return nil
}

// questionField is the request field "questions.<name>[.<field>]".
func questionField(name, field string) string {
	if field == "" {
		return "questions." + name
	}
	return "questions." + name + "." + field
}
