package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/wire"
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
		e.relayEvents(w, c, up, wire.NewChatMeter(), true)
	}
}
