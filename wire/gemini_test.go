package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The counts below are Google's documented examples (the context-caching
// guide's cached answer, a thinking model's function call, a Vertex
// stream's last chunk); each expectation is worked out beside it.
func TestGeminiUsage(t *testing.T) {
	runUsageCases(t, GeminiUsage, []usageCase{
		// 696219 prompt of which 696190 cached: 29 uncached.
		{"cached answer", `{"candidates":[{"content":{"parts":[{"text":"The usageMetadata of"}],"role":"model"},"finishReason":"STOP"}],
			"usageMetadata":{"promptTokenCount":696219,"cachedContentTokenCount":696190,"candidatesTokenCount":214,"totalTokenCount":696433},"modelVersion":"gemini-2.5-flash"}`,
			Usage{InputTokens: 29, CacheReadTokens: 696190, OutputTokens: 214}, true, ""},
		// Thoughts are output: 15 + 4.
		{"thinking function call", `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"c2ln"}],"role":"model"},"finishReason":"STOP"}],
			"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":15,"totalTokenCount":31,"thoughtsTokenCount":4}}`,
			Usage{InputTokens: 12, OutputTokens: 19}, true, ""},
		{"stream chunk with details", `{"candidates":[{"content":{"role":"model","parts":[{"text":"","thoughtSignature":"AY89"}]},"finishReason":"STOP"}],
			"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":9,"totalTokenCount":10,"trafficType":"ON_DEMAND","promptTokensDetails":[{"modality":"TEXT","tokenCount":1}],"candidatesTokensDetails":[{"modality":"TEXT","tokenCount":9}]},
			"modelVersion":"gemini-3.1-flash-lite-preview","responseId":"tTCwacuEBMvnitYP06qsgQY"}`,
			Usage{InputTokens: 1, OutputTokens: 9}, true, ""},
		// totalTokenCount 400 = prompt 30 + toolUsePrompt 120 + candidates
		// 50 + thoughts 200: input 30 - 10 cached + 120 = 140, output 250.
		{"tool-use prompt is input", `{"usageMetadata":{"promptTokenCount":30,"cachedContentTokenCount":10,"toolUsePromptTokenCount":120,"candidatesTokenCount":50,"thoughtsTokenCount":200,"totalTokenCount":400}}`,
			Usage{InputTokens: 140, CacheReadTokens: 10, OutputTokens: 250}, true, ""},
		{"prompt only (an early chunk)", `{"candidates":[{"content":{"parts":[{"text":"Hi"}]}}],"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8}}`,
			Usage{InputTokens: 8}, true, ""},
		{"empty usageMetadata", `{"usageMetadata":{}}`, Usage{}, true, ""},
		{"null usageMetadata", `{"candidates":[],"usageMetadata":null}`, Usage{}, false, ""},
		{"no usageMetadata", `{"candidates":[{"content":{"parts":[{"text":"x"}]}}]}`, Usage{}, false, ""},
		{"chat usage is not Gemini's", `{"usage":{"prompt_tokens":3}}`, Usage{}, false, ""},
		{"cached above prompt", `{"usageMetadata":{"promptTokenCount":10,"cachedContentTokenCount":11}}`, Usage{}, false,
			"usageMetadata.cachedContentTokenCount (11) is above usageMetadata.promptTokenCount (10)"},
		{"negative candidates", `{"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":-1}}`, Usage{}, false, "usageMetadata.candidatesTokenCount is negative (-1)"},
		{"negative thoughts", `{"usageMetadata":{"thoughtsTokenCount":-2}}`, Usage{}, false, "usageMetadata.thoughtsTokenCount is negative (-2)"},
		{"negative tool use", `{"usageMetadata":{"toolUsePromptTokenCount":-3}}`, Usage{}, false, "usageMetadata.toolUsePromptTokenCount is negative (-3)"},
		{"output overflow", `{"usageMetadata":{"candidatesTokenCount":9223372036854775807,"thoughtsTokenCount":1}}`, Usage{}, false, "usageMetadata.thoughtsTokenCount (1) overflows"},
		{"input overflow", `{"usageMetadata":{"promptTokenCount":9223372036854775807,"toolUsePromptTokenCount":1}}`, Usage{}, false, "usageMetadata.toolUsePromptTokenCount (1) overflows"},
		{"fractional count", `{"usageMetadata":{"promptTokenCount":1.5}}`, Usage{}, false, "usageMetadata.promptTokenCount must be int64"},
		{"string count", `{"usageMetadata":{"promptTokenCount":"7"}}`, Usage{}, false, "usageMetadata.promptTokenCount must be int64, not string"},
		{"usageMetadata not an object", `{"usageMetadata":[1]}`, Usage{}, false, "usageMetadata must be"},
		{"not an object", `[1]`, Usage{}, false, "must be a JSON object"},
		{"truncated", `{"usageMetadata":{"promptTokenCount":1`, Usage{}, false, "gemini response: invalid JSON"},
	})
}

func TestGeminiMeter(t *testing.T) {
	// A thinking stream as streamGenerateContent?alt=sse sends it: the
	// prompt count on every chunk, the output on the last.
	events := []event{
		{"", `{"candidates":[{"content":{"parts":[{"text":"Weighing the usageMetadata question","thought":true}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":2100,"cachedContentTokenCount":2048,"totalTokenCount":2100},"modelVersion":"gemini-2.5-pro","responseId":"r1"}`},
		{"", `{"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":2100,"cachedContentTokenCount":2048,"totalTokenCount":2100},"modelVersion":"gemini-2.5-pro","responseId":"r1"}`},
		{"", `{"candidates":[{"content":{"parts":[{"text":" there"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":2100,"cachedContentTokenCount":2048,"candidatesTokenCount":2,"thoughtsTokenCount":30,"totalTokenCount":2132},"modelVersion":"gemini-2.5-pro","responseId":"r1"}`},
	}
	tests := []struct {
		name   string
		events []event
		want   Usage
		ok     bool
	}{
		// 2100 - 2048 = 52 uncached; output 2 + 30 thoughts.
		{"whole stream: last wins", events, Usage{InputTokens: 52, CacheReadTokens: 2048, OutputTokens: 32}, true},
		{"cut after two chunks", events[:2], Usage{InputTokens: 52, CacheReadTokens: 2048}, true},
		{"no usage", []event{{"", `{"candidates":[{"content":{"parts":[{"text":"a"}]}}]}`}, {"", `{"usageMetadata":null}`}}, Usage{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewGeminiMeter()
			observeAll(t, m, tt.events)
			if got, ok := m.Usage(); got != tt.want || ok != tt.ok {
				t.Fatalf("Usage = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
	m := NewGeminiMeter()
	observeAll(t, m, events)
	if err := m.Observe("", []byte(`{"usageMetadata":{"promptTokenCount":-1}}`)); err == nil ||
		!strings.Contains(err.Error(), "usageMetadata.promptTokenCount is negative") {
		t.Fatalf("error = %v", err)
	}
	if got, _ := m.Usage(); got != (Usage{InputTokens: 52, CacheReadTokens: 2048, OutputTokens: 32}) {
		t.Fatalf("a rejected chunk changed the usage: %+v", got)
	}
}

func TestMayHaveUsageMetadata(t *testing.T) {
	for data, want := range map[string]bool{
		`{"candidates":[{"content":{"parts":[{"text":"hi"}]}}]}`:                false,
		`{"usageMetadata":null}`:                                                false,
		`{"usageMetadata" : {"promptTokenCount":1}}`:                            true,
		`{"candidates":[{"content":{"parts":[{"text":"\"usageMetadata\""}]}}]}`: false,
		`{"usage":{"prompt_tokens":1}}`:                                         false,
		`{"usageMetadata"`:                                                      false,
	} {
		if got := mayHaveUsageMetadata([]byte(data)); got != want {
			t.Errorf("mayHaveUsageMetadata(%s) = %v, want %v", data, got, want)
		}
	}
}

func TestGeminiText(t *testing.T) {
	const sure, unsure = true, false
	cases := []struct {
		name string
		data string
		want int
		scan bool // the scan answers alone, without encoding/json
	}{
		{"text", `{"candidates":[{"content":{"parts":[{"text":"some words "}],"role":"model"},"index":0}],"modelVersion":"m"}`, 11, sure},
		{"thought and text", `{"candidates":[{"content":{"parts":[{"text":"hmm","thought":true},{"text":"ok\n"}]}}]}`, 6, sure},
		{"function call args", `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"a": 1}},"thoughtSignature":"c2ln"}]}}]}`, 8, sure},
		{"null args and parts", `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":null}},null,{"text":null}]}},null,{"content":null}]}`, 0, sure},
		{"string args count nothing", `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":"{}"}}]}}]}`, 0, sure},
		{"signature only", `{"candidates":[{"content":{"parts":[{"text":"","thoughtSignature":"AY89"}]},"finishReason":"STOP"}]}`, 0, sure},
		{"usage only", `{"usageMetadata":{"promptTokenCount":3}}`, 0, sure},
		{"non-ASCII", `{"candidates":[{"content":{"parts":[{"text":"café"}]}}]}`, 5, sure},
		{"\\u escape (decoded)", `{"candidates":[{"content":{"parts":[{"text":"caf\u00e9"}]}}]}`, 5, unsure},
		{"odd type refused", `{"candidates":[{"content":{"parts":[{"text":7}]}}]}`, 0, unsure},
		{"key in other case", `{"candidates":[{"content":{"parts":[{"Text":"abc"}]}}]}`, 3, unsure},
		{"not JSON", `[DONE]`, 0, sure},
	}
	for _, c := range cases {
		if got := GeminiText([]byte(c.data)); got != c.want {
			t.Errorf("%s: %d text bytes, want %d", c.name, got, c.want)
		}
		if c.data[0] != '{' {
			continue
		}
		n, ok := scanGeminiText([]byte(c.data))
		if ok != c.scan || ok && n != c.want {
			t.Errorf("%s: the scan says %d, sure %v; want sure %v", c.name, n, ok, c.scan)
		}
	}
}

// TestGeminiErrorsDoNotQuoteBodies: errors name fields and offsets only.
func TestGeminiErrorsDoNotQuoteBodies(t *testing.T) {
	const secret = "SECRET-PROMPT-TEXT"
	for _, b := range []string{
		`{"candidates":[{"content":{"parts":[{"text":"` + secret + `"}]}}],"usageMetadata":{"promptTokenCount":"` + secret + `"}}`,
		`{"candidates":[{"content":{"parts":[{"text":"` + secret + `"}]}}],"usageMetadata":` + secret + `}`,
		secret,
	} {
		_, _, err := GeminiUsage([]byte(b))
		if err == nil {
			t.Fatalf("no error for %s", b)
		}
		if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "'S'") {
			t.Fatalf("error %q quotes the body", err)
		}
	}
}

// FuzzGeminiUsage: GeminiUsage never panics, never answers a negative
// count or ok with an error, and its fast path answers what decoding the
// whole body answers on every well-formed body.
func FuzzGeminiUsage(f *testing.F) {
	for _, s := range []string{
		`{"candidates":[{"content":{"parts":[{"text":"a \"usageMetadata\":{}"}]}}],"usageMetadata":{"promptTokenCount":696219,"cachedContentTokenCount":696190,"candidatesTokenCount":214,"totalTokenCount":696433}}`,
		`{"usageMetadata":{"promptTokenCount":30,"toolUsePromptTokenCount":120,"candidatesTokenCount":50,"thoughtsTokenCount":200}}`,
		`{"usageMetadata":null}`, `{"UsageMetadata":{"promptTokenCount":1}}`, `{"usageMetadata":{"promptTokenCount":-1}}`,
		`{"usageMetadata":[1]}`, `[1]`, `{"usageMetadata":{},"usageMetadata":{"promptTokenCount":2}}`,
		`{"usageMetadata":{"promptTokenCount":1e3}}`, `{"usageMetadata":{"promptTokenCount":12345678901234567890}}`,
		`{"usageMetadata":{"candidatesTokenCount":9223372036854775807,"thoughtsTokenCount":1}}`,
		`{"usageMetadata":{"PROMPTTOKENCOUNT":4}}`, `{"usageMetadata":{"promptTokenCount":9,"cachedContentTokenCount":10}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		u1, ok1, err1 := GeminiUsage(body)
		if err1 != nil && ok1 {
			t.Fatal("ok with an error")
		}
		if !ok1 && u1 != (Usage{}) {
			t.Fatalf("usage %+v without ok", u1)
		}
		for _, v := range []int64{u1.InputTokens, u1.CacheReadTokens, u1.OutputTokens} {
			if v < 0 {
				t.Fatalf("negative count in %+v", u1)
			}
		}
		if !json.Valid(body) {
			return // the fast path may bill a body malformed elsewhere
		}
		u2, ok2, err2 := geminiUsageFull(body)
		if !reflect.DeepEqual(u1, u2) || ok1 != ok2 || (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("%s: fast %+v %v %v, full %+v %v %v", body, u1, ok1, err1, u2, ok2, err2)
		}
	})
}

func FuzzGeminiMeter(f *testing.F) {
	fuzzMeter(f, NewGeminiMeter,
		[2]string{"", `{"candidates":[{"content":{"parts":[{"text":"Hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":12}}`},
		[2]string{"", `{"usageMetadata":null}`})
}

// FuzzGeminiText: the scan gives encoding/json's answer on every
// well-formed chunk.
func FuzzGeminiText(f *testing.F) {
	for _, s := range []string{
		`{"candidates":[{"content":{"parts":[{"text":"a\nb","thought":true},{"functionCall":{"name":"f","args":{"x":[1,2]}}}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"caf\u00e9"}]}},null]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"args":{},"args":{"a":1}}}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":7}]}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n := GeminiText(data)
		if !json.Valid(data) || data[0] != '{' {
			return
		}
		if want := decodeGeminiText(data); n != want {
			t.Fatalf("GeminiText(%s) = %d; encoding/json: %d", data, n, want)
		}
	})
}
