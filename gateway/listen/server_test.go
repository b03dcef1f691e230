package listen

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/gateway/apierr"
)

// TestReadBody: the body comes back whole, read into one buffer sized by
// its Content-Length (the read that finds the end does not regrow it to
// twice that), and a body over the limit is a 400 naming the field.
func TestReadBody(t *testing.T) {
	for _, n := range []int{1, 300, 4096, 100_000} {
		body := bytes.Repeat([]byte("x"), n)
		got, err := ReadBody(httptest.NewRequest("POST", "/", bytes.NewReader(body)), 1<<20)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%d bytes: got %d bytes, %v", n, len(got), err)
		}
		// n + MinRead rounded up to the allocator's size class (at most an
		// eighth more, and 64 bytes for the smallest); a buffer regrown by
		// the last read is twice n + MinRead (1,024 bytes for 1, 1,280 for
		// 300, 8,192 for 4,096).
		if limit := (n+bytes.MinRead)*9/8 + 64; cap(got) > limit {
			t.Errorf("%d bytes read into a buffer of %d (at most %d)", n, cap(got), limit)
		}
	}
	// Unknown length (chunked): still whole.
	r := httptest.NewRequest("POST", "/", strings.NewReader("hello"))
	r.ContentLength = -1
	if got, err := ReadBody(r, 10); err != nil || string(got) != "hello" {
		t.Errorf("chunked: %q, %v", got, err)
	}
	for _, tc := range []struct {
		name string
		cl   int64
	}{{"declared", 11}, {"undeclared", -1}} {
		req := httptest.NewRequest("POST", "/", strings.NewReader("hello world"))
		req.ContentLength = tc.cl
		_, err := ReadBody(req, 10)
		var e *apierr.Error
		if !errors.As(err, &e) || e.Status != 400 || e.Code != "invalid_body" {
			t.Errorf("%s length over the limit: %v", tc.name, err)
		}
	}
}
