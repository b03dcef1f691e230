package sim

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// discardWriter is a flushing ResponseWriter that keeps nothing, so the
// benchmarks measure the sim, not a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Flush()                      {}

func benchServe(b *testing.B, path, body string, hdr map[string]string) {
	s := New(Options{})
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.RunParallel(func(pb *testing.PB) {
		w := &discardWriter{h: make(http.Header)}
		rd := strings.NewReader(body)
		req := httptest.NewRequest(http.MethodPost, path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		for pb.Next() {
			rd.Reset(body)
			req.Body = io.NopCloser(rd)
			clear(w.h)
			s.ServeHTTP(w, req)
		}
	})
}

func BenchmarkChatJSON(b *testing.B)   { benchServe(b, "/v1/chat/completions", chatBody, nil) }
func BenchmarkChatStream(b *testing.B) { benchServe(b, "/v1/chat/completions", chatStream, nil) }
func BenchmarkResponsesStream(b *testing.B) {
	benchServe(b, "/v1/responses", respStream, nil)
}
func BenchmarkMessagesStream(b *testing.B) {
	benchServe(b, "/v1/messages", msgStream, anthropicHdr)
}
func BenchmarkMessagesCached(b *testing.B) {
	benchServe(b, "/v1/messages", cacheReq("modela-fable-5-1", "5m", "q one|1h"), anthropicHdr)
}

// TestChatStreamAllocs keeps the hot path lean: a streamed chat reply
// allocates a bounded number of times, independent of its chunk count.
func TestChatStreamAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count")
	}
	measure := func(chunks int) float64 {
		s := New(Options{Chunks: chunks})
		w := &discardWriter{h: make(http.Header)}
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		body := []byte(chatStream)
		s.ServeHTTP(w, withBody(req, body)) // warm the pool
		return testing.AllocsPerRun(50, func() {
			clear(w.h)
			s.ServeHTTP(w, withBody(req, body))
		})
	}
	// One allocation per chunk would add 60 from 4 chunks to 64. A few are
	// allowed: under the race detector (make test) sync.Pool drops a
	// random share of what is put back, and the count moves by one or two
	// between runs.
	few, many := measure(4), measure(64)
	if many > few+4 {
		t.Errorf("allocations grow with chunks: %v for 4 chunks, %v for 64", few, many)
	}
	if few > 60 {
		t.Errorf("%v allocations per streamed request", few)
	}
}

func withBody(r *http.Request, body []byte) *http.Request {
	r.Body = io.NopCloser(bytes.NewReader(body))
	return r
}
