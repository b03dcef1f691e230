package gateway

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReadBody: the body comes back whole, in one buffer sized by its
// Content-Length (not regrown to twice that by the read that finds its
// end), and a body over the limit is a 400 naming the field.
func TestReadBody(t *testing.T) {
	for _, n := range []int{1, 300, 4096, 100_000} {
		body := bytes.Repeat([]byte("x"), n)
		got, err := readBody(httptest.NewRequest("POST", "/", bytes.NewReader(body)), 1<<20)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%d bytes: got %d bytes, %v", n, len(got), err)
		}
		// n + MinRead, rounded up to the allocator's size class (at most
		// 1/8 more); a regrown buffer would be about twice that.
		if cap(got) > (n+bytes.MinRead)*9/8 {
			t.Errorf("%d bytes read into a buffer of %d", n, cap(got))
		}
	}
	// Unknown length (chunked): still whole.
	r := httptest.NewRequest("POST", "/", strings.NewReader("hello"))
	r.ContentLength = -1
	if got, err := readBody(r, 10); err != nil || string(got) != "hello" {
		t.Errorf("chunked: %q, %v", got, err)
	}
	for _, r := range []struct {
		name string
		cl   int64
	}{{"declared", 11}, {"undeclared", -1}} {
		req := httptest.NewRequest("POST", "/", strings.NewReader("hello world"))
		req.ContentLength = r.cl
		_, err := readBody(req, 10)
		var e *Error
		if !errors.As(err, &e) || e.Status != 400 || e.Code != "invalid_body" {
			t.Errorf("%s length over the limit: %v", r.name, err)
		}
	}
}
