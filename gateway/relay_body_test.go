package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelrelay/modelrelay/gateway/apierr"
)

// TestReadBody: the body comes back whole, read into one buffer sized by
// its Content-Length (the read that finds the end does not regrow it to
// twice that), and a body over the limit is a 400 naming the field.
func TestReadBody(t *testing.T) {
	for _, n := range []int{1, 300, 4096, 100_000} {
		body := bytes.Repeat([]byte("x"), n)
		got, err := readBody(httptest.NewRequest("POST", "/", bytes.NewReader(body)), 1<<20)
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
	if got, err := readBody(r, 10); err != nil || string(got) != "hello" {
		t.Errorf("chunked: %q, %v", got, err)
	}
	for _, tc := range []struct {
		name string
		cl   int64
	}{{"declared", 11}, {"undeclared", -1}} {
		req := httptest.NewRequest("POST", "/", strings.NewReader("hello world"))
		req.ContentLength = tc.cl
		_, err := readBody(req, 10)
		var e *apierr.Error
		if !errors.As(err, &e) || e.Status != 400 || e.Code != "invalid_body" {
			t.Errorf("%s length over the limit: %v", tc.name, err)
		}
	}
}

// TestJSONAnswersConcurrent: JSON answers are read into pooled buffers
// (answerBufs); each of many concurrent callers gets its own answer whole,
// the one that echoes its own prompt, never a piece of another's.
func TestJSONAnswersConcurrent(t *testing.T) {
	e := newEnv(t)
	e.account("acme", "100")
	key := e.key("acme", "economy")
	const callers, calls = 16, 25
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				word := fmt.Sprintf("caller%dcall%d", g, i)
				req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions",
					strings.NewReader(chatBody("modelf-flash", word+" "+strings.Repeat("padding ", g*40))))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				data, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					t.Errorf("%s: status %d, %v", word, resp.StatusCode, err)
					return
				}
				var out struct {
					Choices []struct {
						Message struct{ Content string } `json:"message"`
					} `json:"choices"`
				}
				if err := json.Unmarshal(data, &out); err != nil || len(out.Choices) != 1 {
					t.Errorf("%s: answer %q is not one whole completion: %v", word, data, err)
					return
				}
				if got := out.Choices[0].Message.Content; !strings.Contains(got, word) || strings.Count(got, "caller") != 1 {
					t.Errorf("%s: answer %q is not its own", word, got)
				}
				if n, _ := strconv.Atoi(resp.Header.Get("Content-Length")); n != len(data) {
					t.Errorf("%s: Content-Length %d, body %d bytes", word, n, len(data))
				}
			}
		}()
	}
	wg.Wait()
}
