package xlate

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// FuzzRespParseRequest: any body is read or refused with an Invalid or
// an Unsupported, never a panic; what is read, written back as an answer
// and as a stream, is valid JSON, and its thinking survives the round trip.
func FuzzRespParseRequest(f *testing.F) {
	for _, name := range []string{"request_function_tools.json", "request_tool_outputs.json", "request_reasoning.json", "request_image.json"} {
		f.Add(respFixture(f, name))
	}
	f.Add([]byte(`{"model":"m","input":[{"type":"reasoning","summary":[],"encrypted_content":"mrx1.W3sidCI6InRoaW5raW5nIiwieCI6ImEiLCJzIjoiYiJ9XQ"}]}`))
	f.Add([]byte(`{"model":"m","input":"x","store":true}`))
	f.Add([]byte(`{"model":"m","input":[{"role":"assistant","content":"a\u2028b"},{"type":"function_call","call_id":"c","name":"n","arguments":"{"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := respParseRequest(body)
		if err != nil {
			var inv *Invalid
			var uns *Unsupported
			if !errors.As(err, &inv) && !errors.As(err, &uns) {
				t.Fatalf("error %T %v: want Invalid or Unsupported", err, err)
			}
			return
		}
		var parts []Part
		for _, m := range r.Messages {
			if m.Role == RoleAssistant {
				parts = append(parts, m.Parts...)
			}
		}
		ans, err := respWriteAnswer(&Answer{ID: "a", Parts: parts, HasUsage: true}, r)
		if err != nil || !json.Valid(ans) {
			t.Fatalf("answer %v: not valid JSON: %s", err, ans)
		}
		respFuzzStream(t, r, parts)
		respFuzzThinking(t, ans, parts)
	})
}

// respFuzzStream streams parts for r and checks every event is one line
// of valid JSON.
func respFuzzStream(t *testing.T, r *Request, parts []Part) {
	evs := []Event{{Kind: EvStart, ID: "s"}}
	for i, p := range parts {
		evs = append(evs, Event{Kind: EvBlockStart, Block: i, Part: p.Type, ID: p.ID, Name: p.Name, Text: p.Data})
		evs = append(evs, Event{Kind: EvDelta, Block: i, Text: p.Text + p.Arguments})
		if p.Signature != "" {
			evs = append(evs, Event{Kind: EvSignature, Block: i, Text: p.Signature})
		}
		evs = append(evs, Event{Kind: EvBlockEnd, Block: i})
	}
	out := respEncodeAll(r, append(evs, Event{Kind: EvFinish, Finish: FinishStop}), false)
	for _, block := range strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n") {
		_, data, ok := strings.Cut(block, "\ndata: ")
		if !ok || strings.Contains(data, "\n") || !json.Valid([]byte(data)) {
			t.Fatalf("event not one line of valid JSON: %q", block)
		}
	}
}

// respFuzzThinking reads the answer's output back as input and checks the
// thinking parts came back unchanged.
func respFuzzThinking(t *testing.T, ans []byte, parts []Part) {
	var want []Part
	for _, p := range parts {
		if p.Type == Thinking || p.Type == RedactedThinking {
			want = append(want, p)
		}
	}
	var o struct{ Output json.RawMessage }
	if err := json.Unmarshal(ans, &o); err != nil {
		t.Fatal(err)
	}
	r, err := respParseRequest([]byte(`{"model":"m","input":` + string(o.Output) + `}`))
	if err != nil {
		t.Fatalf("the answer's output cannot be read back: %v", err)
	}
	var got []Part
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			if p.Type == Thinking || p.Type == RedactedThinking {
				got = append(got, p)
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("thinking back %+v, want %+v", got, want)
	}
}

// FuzzRespAppendString: strings are escaped as encoding/json escapes them
// (HTML escaping off).
func FuzzRespAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"b\\", "\x00\x01\b\f\n\r\t\x1f\x7f", "é…\u2028\u2029", "\xff\xfe", "a\xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); !bytes.Equal(got, bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want.Bytes())
		}
	})
}
