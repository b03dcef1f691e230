package sim

import (
	"bytes"
	"math"
	"net/http"
	"strings"
	"testing"
)

type soAnswer struct {
	Type          string             `json:"type"`
	Noul          *float64           `json:"noul"`
	Choice        *string            `json:"choice"`
	Probabilities map[string]float64 `json:"probabilities"`
	Score         *float64           `json:"score"`
}

type soResponse struct {
	Model   string              `json:"model"`
	Answers map[string]soAnswer `json:"answers"`
	Usage   struct {
		InputTokens  *int64 `json:"input_tokens"`
		OutputTokens *int64 `json:"output_tokens"`
	} `json:"usage"`
}

func TestSystemOne(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	body := `{"model":"sysmodel-1.13.0","state":"the user asked for a refund twice","questions":{` +
		`"angry":{"type":"noul","instructions":"is the user angry?"},` +
		`"topic":{"type":"choice","options":["billing","shipping","other"]},` +
		`"urgency":{"type":"score","min":1,"max":5}}}`
	want, err := SystemOneUsage([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	wantInput := Tokens("the user asked for a refund twice") +
		Tokens("angry") + Tokens("is the user angry?") +
		Tokens("topic") + Tokens("billing") + Tokens("shipping") + Tokens("other") +
		Tokens("urgency")
	if want.Prompt != wantInput || want.Completion != 0 {
		t.Fatalf("SystemOneUsage %+v, want input %d", want, wantInput)
	}
	var first []byte
	for _, path := range []string{"/v1/systemone", "/v1/system_one"} {
		status, _, b := call(t, ts, http.MethodPost, path, body, nil)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", path, status, b)
		}
		if first == nil {
			first = b
		} else if !bytes.Equal(first, b) {
			t.Errorf("answers are not deterministic:\n%s\n%s", first, b)
		}
		r := decode[soResponse](t, b)
		if r.Model != "sysmodel-1.13.0" || r.Usage.InputTokens == nil || *r.Usage.InputTokens != wantInput ||
			r.Usage.OutputTokens == nil || *r.Usage.OutputTokens != 0 {
			t.Errorf("%s: %s", path, b)
		}
		if a := r.Answers["angry"]; a.Type != "noul" || a.Noul == nil || *a.Noul < 0 || *a.Noul > 1 {
			t.Errorf("noul answer %+v", a)
		}
		a := r.Answers["topic"]
		if a.Type != "choice" || a.Choice == nil || len(a.Probabilities) != 3 {
			t.Fatalf("choice answer %+v", a)
		}
		sum, best := 0.0, ""
		for o, p := range a.Probabilities {
			sum += p
			if best == "" || p > a.Probabilities[best] {
				best = o
			}
		}
		if math.Abs(sum-1) > 0.001 || a.Probabilities[*a.Choice] != a.Probabilities[best] {
			t.Errorf("choice %q probabilities %v (sum %v)", *a.Choice, a.Probabilities, sum)
		}
		if s := r.Answers["urgency"]; s.Type != "score" || s.Score == nil || *s.Score < 1 || *s.Score > 5 {
			t.Errorf("score answer %+v", s)
		}
	}
}

func TestSystemOneErrors(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	long := strings.Repeat("w", 4*StateTokenLimit+4*10+1) // 32768+10+1 tokens
	cases := []struct {
		name   string
		body   string
		status int
		loc    string
		msg    string
	}{
		{"state too long", `{"model":"sysmodel-latest","state":"` + long + `","questions":{"q":{"type":"noul","instructions":"` + strings.Repeat("i", 40) + `"}}}`,
			422, "body,state", "state is too long: 32779 tokens, limit 32778"},
		{"choice without options", `{"model":"sysmodel-latest","state":"s","questions":{"c":{"type":"choice"}}}`,
			422, "body,questions,c,options", "at least one option"},
		{"duplicate options", `{"model":"sysmodel-latest","state":"s","questions":{"c":{"type":"choice","options":["a","a"]}}}`,
			422, "body,questions,c,options", "duplicate"},
		{"bad type", `{"model":"sysmodel-latest","state":"s","questions":{"c":{"type":"essay"}}}`,
			422, "body,questions,c,type", "noul, choice, score"},
		{"score min above max", `{"model":"sysmodel-latest","state":"s","questions":{"c":{"type":"score","min":3,"max":1}}}`,
			422, "body,questions,c,max", "max"},
		{"empty questions", `{"model":"sysmodel-latest","state":"s","questions":{}}`, 422, "body,questions", "at least 1"},
		{"missing state", `{"model":"sysmodel-latest","questions":{"q":{"type":"noul"}}}`, 422, "body,state", "Field required"},
		{"unknown model", `{"model":"sysmodel-9","state":"s","questions":{"q":{"type":"noul"}}}`, 404, "", "does not exist"},
		{"text model", `{"model":"modelf-flash","state":"s","questions":{"q":{"type":"noul"}}}`, 404, "", "not served"},
		{"bad json", `{"state":`, 400, "", "JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, http.MethodPost, "/v1/systemone", tc.body, nil)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %.300s", status, tc.status, b)
			}
			if _, err := SystemOneUsage([]byte(tc.body)); err == nil {
				t.Errorf("SystemOneUsage accepted a body the server rejects")
			}
			if status != 422 {
				if e := decode[errBody](t, b); !strings.Contains(e.Error.Message, tc.msg) {
					t.Errorf("message %q, want %q", e.Error.Message, tc.msg)
				}
				return
			}
			d := decode[struct {
				Detail []problem `json:"detail"`
			}](t, b)
			if len(d.Detail) != 1 || strings.Join(d.Detail[0].Loc, ",") != tc.loc || !strings.Contains(d.Detail[0].Msg, tc.msg) {
				t.Errorf("detail %+v, want loc %s msg %q", d.Detail, tc.loc, tc.msg)
			}
		})
	}
}

func TestSystemOneStateAtLimit(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	state := strings.Repeat("w", 4*(StateTokenLimit+10))
	body := `{"model":"sysmodel-preview","state":"` + state + `","questions":{"q":{"type":"noul","instructions":"` + strings.Repeat("i", 40) + `"}}}`
	if status, _, b := call(t, ts, http.MethodPost, "/v1/systemone", body, nil); status != http.StatusOK {
		t.Fatalf("state at the limit: %d %.300s", status, b)
	}
}
