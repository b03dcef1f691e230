package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestJSONAnswersConcurrent: JSON answers are read into pooled buffers
// (answerBufs); each of many concurrent callers gets its own answer whole,
// the one that echoes its own prompt, never a piece of another's.
func TestJSONAnswersConcurrent(t *testing.T) {
	t.Parallel()
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
