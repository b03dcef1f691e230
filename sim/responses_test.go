package sim

import (
	"net/http"
	"strings"
	"testing"
)

type responseObj struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	CreatedAt         int64  `json:"created_at"`
	Status            string `json:"status"`
	Model             string `json:"model"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output []struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Status  string `json:"status"`
		Role    string `json:"role"`
		Content []struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			Annotations []any  `json:"annotations"`
		} `json:"content"`
	} `json:"output"`
	Usage *struct {
		InputTokens        int64 `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int64 `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens *int64 `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int64 `json:"total_tokens"`
	} `json:"usage"`
}

func TestResponsesJSON(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	cases := []struct {
		name     string
		body     string
		input    int64
		output   int64
		status   string
		contains string
	}{
		{
			name:     "string input with instructions and ignored fields",
			body:     `{"model":"modelb-6.1-sol","instructions":"be terse","input":"canary-9 ping","tools":[{"type":"web_search"}],"include":["x"],"store":false,"reasoning":{"summary":"auto"},"metadata":{"a":"b"}}`,
			input:    2 + 4 + 4,
			output:   ReplyWords,
			status:   "completed",
			contains: "Simulated reply from modelb-6.1-sol: canary-9 ping",
		},
		{
			name: "item array: messages and a function output",
			body: `{"model":"modelc-4.7","input":[{"role":"developer","content":"rules"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"42"},{"role":"user","content":[{"type":"input_text","text":"last canary-3"},{"type":"input_image","image_url":"data:x"}]}]}`,
			input: (4 + 2) + (4 + tokensN(len(`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}`))) +
				(4 + tokensN(len(`{"type":"function_call_output","call_id":"c1","output":"42"}`))) + (4 + 4 + PartTokens),
			output:   ReplyWords,
			status:   "completed",
			contains: "last canary-3",
		},
		{
			name:   "max_output_tokens makes it incomplete",
			body:   `{"model":"modelb-6-astra","input":"hello","max_output_tokens":6}`,
			input:  4 + 2,
			output: 6,
			status: "incomplete",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, http.MethodPost, "/v1/responses", tc.body, nil)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, b)
			}
			r := decode[responseObj](t, b)
			if !strings.HasPrefix(r.ID, "resp_") || r.Object != "response" || r.CreatedAt == 0 || r.Status != tc.status {
				t.Errorf("envelope %+v", r)
			}
			if (tc.status == "incomplete") != (r.IncompleteDetails != nil && r.IncompleteDetails.Reason == "max_output_tokens") {
				t.Errorf("incomplete_details %+v for status %s", r.IncompleteDetails, r.Status)
			}
			if len(r.Output) != 1 || r.Output[0].Type != "message" || r.Output[0].Role != "assistant" ||
				!strings.HasPrefix(r.Output[0].ID, "msg_") || len(r.Output[0].Content) != 1 ||
				r.Output[0].Content[0].Type != "output_text" || r.Output[0].Content[0].Annotations == nil {
				t.Fatalf("output %+v", r.Output)
			}
			text := r.Output[0].Content[0].Text
			if !strings.Contains(text, tc.contains) {
				t.Errorf("text %q does not contain %q", text, tc.contains)
			}
			u := r.Usage
			if u == nil || u.InputTokens != tc.input || u.OutputTokens != tc.output || u.TotalTokens != tc.input+tc.output ||
				u.OutputTokensDetails.ReasoningTokens == nil {
				t.Fatalf("usage %+v, want input %d output %d", u, tc.input, tc.output)
			}
			want, err := ResponsesUsage([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if want.Prompt != u.InputTokens || want.Cached != u.InputTokensDetails.CachedTokens || want.Completion != u.OutputTokens {
				t.Errorf("ResponsesUsage %+v disagrees with %+v", want, u)
			}
		})
	}
}

func TestResponsesErrors(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	cases := []struct {
		name   string
		body   string
		status int
	}{
		{"chat-only model", `{"model":"modelf-flash","input":"x"}`, 404},
		{"messages model", `{"model":"modela-opus-5-5","input":"x"}`, 404},
		{"missing input", `{"model":"modelc-4.7"}`, 400},
		{"input of wrong type", `{"model":"modelc-4.7","input":7}`, 400},
		{"bad json", `{`, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, http.MethodPost, "/v1/responses", tc.body, nil)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			if e := decode[errBody](t, b); e.Error.Message == "" {
				t.Errorf("no error message: %s", b)
			}
		})
	}
}

func TestResponsesStream(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{Chunks: 4})
	for _, tc := range []struct {
		name  string
		extra string
		final string
	}{
		{"completed", ``, "response.completed"},
		{"incomplete", `,"max_output_tokens":5`, "response.incomplete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"modelb-6-astra","stream":true,"input":"stream canary-5"` + tc.extra + `}`
			evs, err := postStream(t, ts, "/v1/responses", body, nil)
			if err != nil {
				t.Fatal(err)
			}
			names := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
				"response.output_text.delta", "response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
				"response.output_text.done", "response.content_part.done", "response.output_item.done", tc.final}
			if len(evs) != len(names) {
				t.Fatalf("%d events, want %d: %+v", len(evs), len(names), evs)
			}
			var deltas strings.Builder
			for i, ev := range evs {
				if ev.name != names[i] {
					t.Errorf("event %d is %q, want %q", i, ev.name, names[i])
				}
				e := decode[struct {
					Type     string       `json:"type"`
					Seq      *int         `json:"sequence_number"`
					Delta    string       `json:"delta"`
					Text     string       `json:"text"`
					ItemID   string       `json:"item_id"`
					Response *responseObj `json:"response"`
				}](t, []byte(ev.data))
				if e.Type != ev.name || e.Seq == nil || *e.Seq != i {
					t.Errorf("event %d: type %q seq %v", i, e.Type, e.Seq)
				}
				switch ev.name {
				case "response.created", "response.in_progress":
					if e.Response == nil || e.Response.Status != "in_progress" || e.Response.Usage != nil {
						t.Errorf("%s: %s", ev.name, ev.data)
					}
				case "response.output_text.delta":
					deltas.WriteString(e.Delta)
					if !strings.HasPrefix(e.ItemID, "msg_") {
						t.Errorf("delta item_id %q", e.ItemID)
					}
				case "response.output_text.done":
					if e.Text != deltas.String() {
						t.Errorf("done text %q, deltas %q", e.Text, deltas.String())
					}
				case tc.final:
					want, err := ResponsesUsage([]byte(body))
					if err != nil {
						t.Fatal(err)
					}
					r := e.Response
					if r == nil || r.Usage == nil || r.Usage.InputTokens != want.Prompt || r.Usage.OutputTokens != want.Completion {
						t.Fatalf("final response %s, want usage %+v", ev.data, want)
					}
					if r.Output[0].Content[0].Text != deltas.String() {
						t.Errorf("final text %q, deltas %q", r.Output[0].Content[0].Text, deltas.String())
					}
					if wantStatus := strings.TrimPrefix(tc.final, "response."); r.Status != wantStatus {
						t.Errorf("final status %q, want %q", r.Status, wantStatus)
					}
				}
			}
			if tc.extra == "" && !strings.Contains(deltas.String(), "canary-5") {
				t.Errorf("deltas %q miss the canary", deltas.String())
			}
		})
	}
}
