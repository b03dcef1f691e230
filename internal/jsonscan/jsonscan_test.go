package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestMember(t *testing.T) {
	tests := []struct {
		name        string
		body        string
		val         string
		found, okay bool
	}{
		{"chat answer", `{"id":"x","choices":[{"message":{"content":"a \"usage\": {} b"}}],"usage":{"prompt_tokens":3}}`, `{"prompt_tokens":3}`, true, true},
		{"first member", ` { "usage" : {"a":1} , "x":[1,{"usage":2}] } `, `{"a":1}`, true, true},
		{"nested only", `{"a":{"usage":{"prompt_tokens":1}}}`, ``, false, true},
		{"null", `{"usage":null}`, `null`, true, true},
		{"number then end", "{\"usage\": 12 \n}", `12`, true, true},
		{"none", `{"choices":[]}`, ``, false, true},
		{"key as a value", `{"a":"usage","b":["usage"]}`, ``, false, true},
		{"twice", `{"usage":{},"usage":{}}`, ``, false, false},
		{"other case", `{"Usage":{}}`, ``, false, false},
		{"escaped key", `{"us\u0061ge":{}}`, ``, false, false},
		{"non-ASCII key", `{"uſage":{}}`, ``, false, false},
		{"not an object", `[{"usage":{}}]`, ``, false, false},
		{"unclosed", `{"usage":{}`, ``, false, false},
		{"unclosed string", `{"usage":{"a":"b}}`, ``, false, false},
		{"trailing text", `{"usage":{}} x`, ``, false, false},
		{"no colon", `{"usage" {}}`, ``, false, false},
		{"empty value", `{"usage":}`, ``, false, false},
		{"too many closers", `{"a":[]]}`, ``, false, false},
		{"empty", ``, ``, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			val, start, found, ok := Member([]byte(tt.body), "usage")
			if string(val) != tt.val || found != tt.found || ok != tt.okay {
				t.Fatalf("Member(%s) = %q, %v, %v; want %q, %v, %v", tt.body, val, found, ok, tt.val, tt.found, tt.okay)
			}
			if found && tt.body[start:start+len(val)] != tt.val {
				t.Fatalf("start %d does not point at the value", start)
			}
		})
	}
}

// FuzzMember: on well-formed JSON objects, whenever Member is sure (ok), its
// answer is encoding/json's: the member is there exactly when a decode into
// a map finds it, with the same value.
func FuzzMember(f *testing.F) {
	for _, s := range []string{`{"usage":{"a":1},"b":[1,2,{"usage":3}]}`, `{"a":"\"usage\":1"}`, `{"usage":null}`, `{"Usage":1}`, `{}`, `{"usage":"x","c":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		val, start, found, ok := Member(body, "usage")
		if !ok || !json.Valid(body) {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return // a valid document that is not an object cannot be ok
		}
		want, has := m["usage"]
		if has != found || (found && !bytes.Equal(bytes.TrimSpace(want), val)) {
			t.Fatalf("Member(%s) = %q, %v; encoding/json: %q, %v", body, val, found, want, has)
		}
		if found && !bytes.Equal(body[start:start+len(val)], val) {
			t.Fatalf("start %d does not point at the value", start)
		}
	})
}
