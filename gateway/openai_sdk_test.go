package gateway

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/modelrelay/modelrelay/sim"
)

func sdkClient(e *env, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(e.url+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// The official Go SDK, unmodified, against the gateway in front of relay sim.
func TestOpenAISDKChat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "auto")
	c := sdkClient(e, key)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "modelb-6-astra",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello to the gateway")},
	}

	res, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Choices) != 1 || !strings.Contains(res.Choices[0].Message.Content, "Say hello to the gateway") {
		t.Errorf("completion %+v", res.Choices)
	}
	if res.Usage.PromptTokens == 0 || res.Usage.CompletionTokens == 0 || res.Usage.TotalTokens != res.Usage.PromptTokens+res.Usage.CompletionTokens {
		t.Errorf("usage %+v", res.Usage)
	}

	t.Run("stream without usage", func(t *testing.T) { checkSDKStreamWithoutUsage(t, c, params) })
	t.Run("stream with usage", func(t *testing.T) { checkSDKStreamUsage(t, c, params, res.Usage) })
	t.Run("models", func(t *testing.T) {
		page, err := c.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, m := range page.Data {
			ids[m.ID] = true
		}
		if !ids["modelb-6-astra"] || !ids["modela-opus-5-5"] {
			t.Errorf("models %v", ids)
		}
	})
	t.Run("typed errors", func(t *testing.T) { checkSDKTypedErrors(t, e, c, params) })
}

// checkSDKStreamWithoutUsage streams params and wants the whole content,
// in three chunks or more, none carrying usage the client did not ask for.
func checkSDKStreamWithoutUsage(t *testing.T, c openai.Client, params openai.ChatCompletionNewParams) {
	s := c.Chat.Completions.NewStreaming(context.Background(), params)
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for s.Next() {
		ch := s.Current()
		if ch.JSON.Usage.Valid() {
			t.Errorf("chunk %d carries usage the client did not ask for: %s", chunks, ch.RawJSON())
		}
		acc.AddChunk(ch)
		chunks++
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks < 3 || !strings.Contains(acc.Choices[0].Message.Content, "Say hello to the gateway") {
		t.Errorf("%d chunks, content %q", chunks, acc.Choices[0].Message.Content)
	}
}

// checkSDKStreamUsage streams params asking for usage and wants the usage
// of the JSON answer, want.
func checkSDKStreamUsage(t *testing.T, c openai.Client, params openai.ChatCompletionNewParams, want openai.CompletionUsage) {
	p := params
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := c.Chat.Completions.NewStreaming(context.Background(), p)
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Usage.PromptTokens != want.PromptTokens || acc.Usage.CompletionTokens != want.CompletionTokens {
		t.Errorf("stream usage %+v, JSON usage %+v", acc.Usage, want)
	}
}

// checkSDKTypedErrors wants the SDK's typed error, with status, message
// and type, for an unknown key (401), a model not sold (403) and a path
// the service does not relay (404, through the SDK's own call).
func checkSDKTypedErrors(t *testing.T, e *env, c openai.Client, params openai.ChatCompletionNewParams) {
	ctx := context.Background()
	cases := []struct {
		name   string
		client openai.Client
		model  string
		status int
	}{
		{"401", sdkClient(e, "sk-not-a-real-key-at-all-000000"), "modelb-6-astra", 401},
		{"403", c, "not-a-model", 403},
	}
	for _, tc := range cases {
		p := params
		p.Model = tc.model
		_, err := tc.client.Chat.Completions.New(ctx, p)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("%s: error %T %v", tc.name, err, err)
		}
		if apiErr.StatusCode != tc.status || apiErr.Message == "" || apiErr.Type == "" {
			t.Errorf("%s: status %d message %q type %q", tc.name, apiErr.StatusCode, apiErr.Message, apiErr.Type)
		}
	}
	_, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "modelb-6-astra", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("embeddings: %v", err)
	}
}

// The provider's 404 for a model it does not know passes through as 404.
func TestUpstream404(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "auto")
	e.sims["std-a"].SetOptions(sim.Options{Status: 404, ErrorRate: 1})
	st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody("modela-opus-5-5", "hi"))
	if st != 404 {
		t.Fatalf("status %d: %s", st, data)
	}
	errBody(t, data)
	if b := e.balance("acme"); b.Balance.String() != "5" || b.Held != 0 {
		t.Errorf("a failed call was charged: %+v", b)
	}
}

// The SDK's stream through the gateway carries exactly the events the sim
// sends for the same request straight to it: the usage chunk the gateway adds
// for billing is invisible.
func TestStreamIsExactlyWhatSimSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "auto")
	body := chatBody("modelf-flash", "exact stream please", `"stream":true`)
	read := func(url, auth string) []string {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		var lines []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines = append(lines, normaliseIDs(sc.Text()))
		}
		return lines
	}
	direct := read(e.simURLs["eco-a"]+"/v1/chat/completions", "")
	via := read(e.url+"/v1/chat/completions", key)
	if strings.Join(direct, "\n") != strings.Join(via, "\n") {
		t.Fatalf("stream differs\ndirect:\n%s\nvia gateway:\n%s", strings.Join(direct, "\n"), strings.Join(via, "\n"))
	}
	if len(direct) < 6 || direct[len(direct)-2] != "data: [DONE]" {
		t.Fatalf("unexpected stream: %q", direct)
	}
}

var (
	reID      = regexp.MustCompile(`"id":"[^"]*"`)
	reCreated = regexp.MustCompile(`"created":[0-9]+`)
)

// normaliseIDs blanks the per-response id and timestamp.
func normaliseIDs(s string) string {
	return reCreated.ReplaceAllString(reID.ReplaceAllString(s, `"id":"X"`), `"created":0`)
}
