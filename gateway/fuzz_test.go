package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/wire"
	"github.com/modelrelay/modelrelay/wire/xlate"
)

// BenchmarkSSE measures the gateway's relay of one chat chunk: read, parse,
// meter, strip the usage member, write and flush.
func BenchmarkSSE(b *testing.B) {
	chunk := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"modelb-6-astra","choices":[{"index":0,"delta":{"content":"some words "},"finish_reason":null}],"usage":null}` + "\n\n"
	const perRun = 1000
	stream := strings.Repeat(chunk, perRun)
	e := &relay{log: discardLogger()}
	c := &call{ep: endpoints[0], sum: &wire.Summary{}, info: &reqInfo{}, body: []byte("{}")}
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += perRun {
		up := &upstream{resp: &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(stream))}}
		w := httptest.NewRecorder()
		e.relayEvents(w, c, up, events{meter: wire.NewChatMeter(), text: wire.ChatText, strip: true})
	}
}

// BenchmarkSSETranslated is BenchmarkSSE for a chat caller whose line
// speaks messages: each upstream text delta read, metered in the
// upstream's shape and written as a chat chunk. Its ns/op beside
// BenchmarkSSE's is the cost of translating one event.
func BenchmarkSSETranslated(b *testing.B) {
	delta := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"some words \"}}\n\n"
	const perRun = 1000
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"modela-opus-5-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		strings.Repeat(delta, perRun) +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2000}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	e := &relay{log: discardLogger()}
	req, err := xlate.ParseRequest(xlate.Chat, []byte(`{"model":"modela-opus-5-5","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	if err != nil {
		b.Fatal(err)
	}
	c := &call{ep: endpoints[0], sum: &wire.Summary{}, info: &reqInfo{}, body: []byte("{}"), x: &xcall{req: req}}
	b.SetBytes(int64(len(delta)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += perRun {
		up := &upstream{resp: &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(stream))}}
		w := httptest.NewRecorder()
		xs, err := xlate.NewStream(xlate.Messages, xlate.Chat, req)
		if err != nil {
			b.Fatal(err)
		}
		res := e.relayEvents(w, c, up, events{meter: wire.NewMessagesMeter(), text: wire.MessagesText, x: xs})
		if !res.complete || res.readErr != nil {
			b.Fatalf("translated stream incomplete: %v", res.readErr)
		}
	}
}
