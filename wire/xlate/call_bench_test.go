package xlate

import "testing"

// BenchmarkTranslatedCall is the translation work of one small chat call a
// Gemini line serves: the request read and written, the answer read and
// written back — what a JSON call costs beyond being relayed as sent.
func BenchmarkTranslatedCall(b *testing.B) {
	req := []byte(`{"model":"modelf-flash","messages":[{"role":"user","content":"Say hello in five words, please."}],"max_tokens":64}`)
	answer := []byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"Simulated reply from modelf-flash: hello there my good friend"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":11,"totalTokenCount":23},"modelVersion":"modelf-flash","responseId":"abc123"}`)
	b.ReportAllocs()
	for b.Loop() {
		r, err := ParseRequest(Chat, req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := BuildRequest(Gemini, r); err != nil {
			b.Fatal(err)
		}
		if _, err := TranslateAnswer(Gemini, Chat, answer, r); err != nil {
			b.Fatal(err)
		}
	}
}
