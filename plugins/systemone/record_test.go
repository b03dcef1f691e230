//go:build record

package main

// The recorder of testdata/plugins/systemone: it builds each case's
// typed-question request, derives the params the gateway passes (the
// contract in params.go), sends the valid ones to the simulated provider
// (package sim, on 127.0.0.1) and writes each fixture with the recorded
// response body and an empty expectation. It is behind the "record" build
// tag so that the plugin's tests never depend on sim.
//
//	go test -tags record -run TestRecord ./plugins/systemone       # record bodies
//	RELAY_UPDATE=1 go test -run TestFixtures ./plugins/systemone   # fill in expect
//
// then check every changed number by hand (see TestHandChecked).

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/fixture"
	"github.com/modelrelay/modelrelay/sim"
)

const recordNow = 1790000000000000000

// q is one question of a recorded request; nil fields are absent.
type q struct {
	Type         any             `json:"type,omitempty"`
	Instructions *string         `json:"instructions,omitempty"`
	Options      []string        `json:"options,omitempty"`
	Min          json.RawMessage `json:"min,omitempty"` // JSON text, kept as sent
	Max          json.RawMessage `json:"max,omitempty"`
}

type recording struct {
	file, name   string
	endpoint     string // "" is systemone
	model, route string
	state        string
	questions    map[string]q
	send         bool // a valid request: record the provider's answer
}

func str(s string) *string { return &s }

// text is n bytes of filler state.
func text(n int) string {
	words := []string{"order ", "shipped ", "late ", "refund "}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[b.Len()%len(words)])
	}
	return b.String()[:n]
}

// thirds is the gateway's conservative token estimate, ceil(len/3).
func thirds(s string) int64 { return (int64(len(s)) + 2) / 3 }

// gatewayParams derives the params the gateway passes for a request: the
// state's token estimate, then per question (in name order) the question
// and its fields as "<name>\x1f<value>".
func gatewayParams(state string, questions map[string]q) []abi.Param {
	params := []abi.Param{{Name: "state_tokens", Value: strconv.FormatInt(thirds(state), 10)}}
	names := make([]string, 0, len(questions))
	for name := range questions {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		qu := questions[name]
		field := func(f, v string) {
			params = append(params, abi.Param{Name: "question." + f, Value: name + "\x1f" + v})
		}
		params = append(params, abi.Param{Name: "question", Value: name})
		if qu.Type != nil {
			s, ok := qu.Type.(string)
			if !ok {
				raw, _ := json.Marshal(qu.Type)
				s = string(raw)
			}
			field("type", s)
		}
		if qu.Options != nil {
			field("options", strconv.Itoa(len(qu.Options)))
		}
		if len(qu.Min) > 0 {
			field("min", string(qu.Min))
		}
		if len(qu.Max) > 0 {
			field("max", string(qu.Max))
		}
		if qu.Instructions != nil {
			field("instructions_tokens", strconv.FormatInt(thirds(*qu.Instructions), 10))
		}
	}
	return params
}

func TestRecord(t *testing.T) {
	srv := httptest.NewServer(sim.New(sim.Options{}))
	defer srv.Close()

	noul := func(instructions string) q { return q{Type: "noul", Instructions: str(instructions)} }
	cases := []recording{
		{file: "noul", name: "one noul question (sysmodel-1.13.0)", model: "sysmodel-1.13.0", route: "standard",
			state:     "The order left the warehouse on Monday and reached the customer on Wednesday.",
			questions: map[string]q{"shipped": noul("Did the order arrive?")}, send: true},
		{file: "choice-score-noul", name: "choice, score and noul questions on the economy route (sysmodel-latest)", model: "sysmodel-latest", route: "economy",
			state: "Customer writes: the parcel came two weeks late and the box was crushed. I want my money back today.",
			questions: map[string]q{
				"sentiment": {Type: "choice", Options: []string{"positive", "neutral", "negative"}, Instructions: str("How does the customer feel?")},
				"urgency":   {Type: "score", Min: json.RawMessage("0"), Max: json.RawMessage("10"), Instructions: str("How urgent is a reply?")},
				"refund":    {Type: "noul"},
			}, send: true},
		{file: "score-exact-bounds", name: "score bounds compared as exact decimals (sysmodel-preview)", model: "sysmodel-preview", route: "standard",
			state:     "Temperature drift over the week was small.",
			questions: map[string]q{"drift": {Type: "score", Min: json.RawMessage("-1.5e-3"), Max: json.RawMessage("-0.0014999")}}, send: true},
		{file: "input-12345", name: "12,345 input tokens at $0.04494 per million", model: "sysmodel-1.13.0", route: "standard",
			state: text(4 * 12344), questions: map[string]q{"q": {Type: "noul"}}, send: true},
		{file: "state-at-limit", name: "state of 98,304 bytes: 32,768 tokens by the estimate, at the limit", model: "sysmodel-preview", route: "standard",
			state: text(98304), questions: map[string]q{"fits": {Type: "noul"}}, send: true},
		{file: "state-limit-raised", name: "state of 32,780 estimated tokens: within 32,768 + the longest instructions (12)", model: "sysmodel-latest", route: "standard",
			state: text(98340), questions: map[string]q{"long": noul(text(36)), "short": noul("ok?")}, send: true},

		{file: "type-unknown", name: "a question type that is not noul, choice or score", model: "sysmodel-1.13.0", route: "standard",
			state: "Some state.", questions: map[string]q{"q1": {Type: "yesno"}}},
		{file: "type-missing", name: "a question without a type", model: "sysmodel-1.13.0", route: "standard",
			state: "Some state.", questions: map[string]q{"q1": {Instructions: str("Is it?")}}},
		{file: "type-not-string", name: "a question whose type is a number", model: "sysmodel-latest", route: "standard",
			state: "Some state.", questions: map[string]q{"q1": {Type: 3}}},
		{file: "choice-one-option", name: "a choice question with one option", model: "sysmodel-latest", route: "standard",
			state: "Some state.", questions: map[string]q{"pick": {Type: "choice", Options: []string{"only"}}}},
		{file: "choice-no-options", name: "a choice question without options", model: "sysmodel-latest", route: "standard",
			state: "Some state.", questions: map[string]q{"pick": {Type: "choice"}}},
		{file: "score-min-equals-max", name: "a score question with min 5 and max 5.0", model: "sysmodel-preview", route: "standard",
			state: "Some state.", questions: map[string]q{"rate": {Type: "score", Min: json.RawMessage("5"), Max: json.RawMessage("5.0")}}},
		{file: "score-min-above-max", name: "a score question with min above max", model: "sysmodel-preview", route: "standard",
			state: "Some state.", questions: map[string]q{"rate": {Type: "score", Min: json.RawMessage("10"), Max: json.RawMessage("1")}}},
		{file: "score-min-not-number", name: "a score question whose min is a string", model: "sysmodel-preview", route: "standard",
			state: "Some state.", questions: map[string]q{"rate": {Type: "score", Min: json.RawMessage(`"low"`), Max: json.RawMessage("1")}}},
		{file: "state-too-long", name: "state of 98,307 bytes: 32,769 estimated tokens, one above the limit", model: "sysmodel-1.13.0", route: "standard",
			state: text(98307), questions: map[string]q{"q": {Type: "noul"}}},
		{file: "state-too-long-raised", name: "state of 32,781 estimated tokens: above 32,768 + the longest instructions (12)", model: "sysmodel-1.13.0", route: "standard",
			state: text(98343), questions: map[string]q{"long": noul(text(36))}},
		{file: "no-questions", name: "an empty questions object", model: "sysmodel-1.13.0", route: "standard",
			state: "Some state.", questions: map[string]q{}},
		{file: "endpoint-not-served", name: "a typed-question model on chat completions", endpoint: "chat_completions", model: "sysmodel-latest", route: "standard",
			state: "Some state.", questions: map[string]q{"q": {Type: "noul"}}},
		{file: "unknown-route", name: "a route the model is not sold on", model: "sysmodel-latest", route: "premium",
			state: "Some state.", questions: map[string]q{"q": {Type: "noul"}}},
	}
	dir := filepath.Join("..", "..", "testdata", "plugins", "systemone")
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			reqBody, err := json.Marshal(map[string]any{"model": c.model, "state": c.state, "questions": c.questions})
			if err != nil {
				t.Fatal(err)
			}
			endpoint := c.endpoint
			if endpoint == "" {
				endpoint = "systemone"
			}
			f := fixture.Fixture{
				Path: filepath.Join(dir, c.file+".json"),
				Name: c.name, Op: fixture.OpCall, Endpoint: endpoint, Model: c.model, Route: c.route, Now: recordNow,
				Admit: &fixture.Admit{
					// The host's estimate of the body's input tokens: a quarter of its bytes.
					InputTokens: pricing.EstimateTokens(len(reqBody)),
					Params:      gatewayParams(c.state, c.questions),
				},
			}
			if c.send {
				resp, err := http.Post(srv.URL+"/v1/systemone", "application/json", bytes.NewReader(reqBody))
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d, %v", resp.StatusCode, err)
				}
				f.Upstream = &fixture.Upstream{Format: fixture.FormatSystemOne, Body: string(body)}
			}
			if err := f.Save(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
