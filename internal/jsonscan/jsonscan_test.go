package jsonscan

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf8"
)

func TestMember(t *testing.T) {
	t.Parallel()
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

func TestElements(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		arr  string
		want []string
		okay bool
	}{
		{"empty", `[]`, nil, true},
		{"empty with space", " [ \n ] ", nil, true},
		{"scalars", `[1, "a,b" ,null]`, []string{`1`, `"a,b"`, `null`}, true},
		{"nested", `[{"a":[1,2]},[3,{"b":"]"}], "\"]"]`, []string{`{"a":[1,2]}`, `[3,{"b":"]"}]`, `"\"]"`}, true},
		{"one", `[{"delta":{}}]`, []string{`{"delta":{}}`}, true},
		{"not an array", `{"a":1}`, nil, false},
		{"empty element", `[1,,2]`, nil, false},
		{"trailing comma", `[1,]`, nil, false},
		{"leading comma", `[,1]`, nil, false},
		{"unclosed", `[1,2`, nil, false},
		{"unclosed string", `["a]`, nil, false},
		{"closed by a brace", `[1}`, nil, false},
		{"trailing text", `[1] x`, nil, false},
		{"blank", ``, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			ok := Elements([]byte(tt.arr), func(e []byte) bool { got = append(got, string(e)); return true })
			if ok != tt.okay || ok && !slices.Equal(got, tt.want) {
				t.Fatalf("Elements(%s) = %q, %v; want %q, %v", tt.arr, got, ok, tt.want, tt.okay)
			}
		})
	}
	var seen int
	if !Elements([]byte(`[1,2,3]`), func([]byte) bool { seen++; return false }) || seen != 1 {
		t.Fatalf("after fn returned false: %d calls (want 1), or not ok", seen)
	}
	if Elements([]byte(`[1,2,3`), func([]byte) bool { return false }) {
		t.Fatal("an unclosed array is ok once fn stops")
	}
}

// FuzzElements: on well-formed JSON arrays Elements is ok, and its elements
// are encoding/json's.
func FuzzElements(f *testing.F) {
	for _, s := range []string{`[]`, `[1,"a",{"b":[2]}]`, `[[],[[]]]`, ` ["\"", "\\"] `, `[1,,2]`, `{"a":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, arr []byte) {
		var got [][]byte
		ok := Elements(arr, func(e []byte) bool { got = append(got, e); return true })
		var want []json.RawMessage
		if json.Unmarshal(arr, &want) != nil || want == nil {
			return // not an array (or null): nothing to compare with
		}
		if !ok || len(got) != len(want) {
			t.Fatalf("Elements(%s) = %d elements, %v; encoding/json: %d", arr, len(got), ok, len(want))
		}
		for i := range want {
			if !bytes.Equal(bytes.TrimSpace(want[i]), got[i]) {
				t.Fatalf("Elements(%s)[%d] = %s; encoding/json: %s", arr, i, got[i], want[i])
			}
		}
	})
}

func TestStringLen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		n    int
		okay bool
	}{
		{`""`, 0, true},
		{`"hello"`, 5, true},
		{`"a\nb\"c\\d\/e\tf"`, 11, true},
		{`"héllo"`, 6, true},
		{`"\u00e9"`, 0, false},
		{`"\x"`, 0, false},
		{`"a\"`, 0, false},
		{`"a"b"`, 0, false},
		{"\"a\tb\"", 0, false},
		{"\"\xff\"", 0, false},
		{`"a`, 0, false},
		{`a"`, 0, false},
		{`12`, 0, false},
		{`"`, 0, false},
	}
	for _, tt := range tests {
		n, ok := StringLen([]byte(tt.s))
		if n != tt.n && ok || ok != tt.okay {
			t.Errorf("StringLen(%s) = %d, %v; want %d, %v", tt.s, n, ok, tt.n, tt.okay)
		}
	}
}

// FuzzStringLen: when StringLen is sure, encoding/json decodes the literal to
// a string of that length; and it is sure of every well-formed literal
// without \u escapes whose bytes are UTF-8.
func FuzzStringLen(f *testing.F) {
	for _, s := range []string{`""`, `"a\nb"`, `"héllo"`, `"\u00e9"`, `"a\"`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		n, ok := StringLen(s)
		var v string
		err := json.Unmarshal(s, &v)
		lit := len(s) > 0 && s[0] == '"' // Unmarshal also trims space around the literal
		switch {
		case ok && (err != nil || len(v) != n):
			t.Fatalf("StringLen(%q) = %d; encoding/json: %q (%d bytes), %v", s, n, v, len(v), err)
		case !ok && err == nil && lit && s[len(s)-1] == '"' && !bytes.Contains(s, []byte(`\u`)) && utf8.Valid(s):
			t.Fatalf("StringLen(%q) is not sure of a plain literal", s)
		}
	})
}
