//go:build record

package main

// The recorder of testdata/plugins/tokens: it sends each case's request to
// the simulated provider (package sim, on 127.0.0.1) and writes the fixture
// with the recorded response body and an empty expectation. It is behind
// the "record" build tag so that the plugin's tests never depend on sim.
//
//	go test -tags record -run TestRecord ./plugins/tokens       # record bodies
//	RELAY_UPDATE=1 go test -run TestFixtures ./plugins/tokens   # fill in expect
//
// then check every changed number by hand (see TestHandChecked).

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/fixture"
	"github.com/modelrelay/modelrelay/sim"
)

const recordNow = 1790000000000000000

type recording struct {
	file, name       string
	endpoint, model  string
	route, format    string
	body             map[string]any
	maxOutput        int64
	repeat           int // send the request this many times first (cache reads)
	defaultOutputCap int64
}

func text(n int) string {
	words := []string{"relay ", "price ", "token ", "cache "}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[b.Len()%len(words)])
	}
	return b.String()[:n]
}

func TestRecord(t *testing.T) {
	srv := httptest.NewServer(sim.New(sim.Options{}))
	defer srv.Close()

	system := func(n int, ttl string) []any {
		cc := map[string]any{"type": "ephemeral"}
		if ttl != "" {
			cc["ttl"] = ttl
		}
		return []any{map[string]any{"type": "text", "text": text(n), "cache_control": cc}}
	}
	user := func(s string) []any { return []any{map[string]any{"role": "user", "content": s}} }

	cases := []recording{
		{file: "chat-plain", name: "chat completion, no cache (economy)", endpoint: "chat_completions", model: "modelb-6-astra", route: "economy", format: "chat",
			body: map[string]any{"model": "modelb-6-astra", "max_tokens": 200, "messages": user("What is the price of one token?")}, maxOutput: 200},
		{file: "chat-default-output", name: "chat completion without max_tokens: the hold uses the default output budget", endpoint: "chat_completions", model: "modeld-5.3-Abliterated", route: "standard", format: "chat",
			body: map[string]any{"model": "modeld-5.3-Abliterated", "messages": user("Say hello.")}},
		{file: "chat-cached", name: "chat completion with cached prompt tokens", endpoint: "chat_completions", model: "modelc-4.7", route: "standard", format: "chat",
			body: map[string]any{"model": "modelc-4.7", "max_completion_tokens": 1000, "messages": []any{
				map[string]any{"role": "system", "content": text(5000)}, map[string]any{"role": "user", "content": "Summarise the above."}}}, maxOutput: 1000},
		{file: "chat-stream", name: "chat completion stream with the usage chunk", endpoint: "chat_completions", model: "modelf-flash", route: "economy", format: "chat_stream",
			body: map[string]any{"model": "modelf-flash", "stream": true, "stream_options": map[string]any{"include_usage": true}, "max_tokens": 500, "messages": user("Stream me a short answer.")}, maxOutput: 500},
		{file: "chat-stream-length", name: "chat completion stream cut by max_tokens", endpoint: "chat_completions", model: "modele-k3", route: "economy", format: "chat_stream",
			body: map[string]any{"model": "modele-k3", "stream": true, "stream_options": map[string]any{"include_usage": true}, "max_tokens": 10, "messages": user("Write a long story about relays.")}, maxOutput: 10},
		{file: "chat-long-context", name: "chat completion above the long-context threshold (modelf-v4-pro, economy)", endpoint: "chat_completions", model: "modelf-v4-pro", route: "economy", format: "chat",
			body: map[string]any{"model": "modelf-v4-pro", "max_tokens": 2000, "messages": user(text(880000))}, maxOutput: 2000},
		{file: "responses", name: "responses call (JSON)", endpoint: "responses", model: "modelb-6.1-sol", route: "standard", format: "responses",
			body: map[string]any{"model": "modelb-6.1-sol", "instructions": "Answer briefly.", "input": "What does a relay do?", "max_output_tokens": 300}, maxOutput: 300},
		{file: "responses-stream", name: "responses stream, usage from response.completed", endpoint: "responses", model: "modelb-6-astra", route: "standard", format: "responses_stream",
			body: map[string]any{"model": "modelb-6-astra", "stream": true, "input": text(6000), "max_output_tokens": 800}, maxOutput: 800},
		{file: "messages-cache-5m", name: "messages call writing a 5-minute cache", endpoint: "messages", model: "modela-sonnet-5-5", route: "standard", format: "messages",
			body: map[string]any{"model": "modela-sonnet-5-5", "max_tokens": 1024, "system": system(4000, ""), "messages": user("Use the cached context.")}, maxOutput: 1024},
		{file: "messages-cache-1h", name: "messages call writing a 1-hour cache", endpoint: "messages", model: "modela-opus-5-5", route: "standard", format: "messages",
			body: map[string]any{"model": "modela-opus-5-5", "max_tokens": 2048, "system": system(8000, "1h"), "messages": user("Use the long-lived cache.")}, maxOutput: 2048},
		{file: "messages-cache-read", name: "messages call reading a cache the same prompt wrote", endpoint: "messages", model: "modela-sonnet-5-5", route: "standard", format: "messages",
			body: map[string]any{"model": "modela-sonnet-5-5", "max_tokens": 1024, "system": system(4000, ""), "messages": user("Use the cached context.")}, maxOutput: 1024, repeat: 1},
		{file: "messages-stream", name: "messages stream with 5-minute and 1-hour cache writes", endpoint: "messages", model: "modela-fable-5-1", route: "standard", format: "messages_stream",
			body: map[string]any{"model": "modela-fable-5-1", "stream": true, "max_tokens": 4000,
				"system": append(system(6000, "1h"), system(2000, "5m")...), "messages": user("Stream with caches.")}, maxOutput: 4000},
		{file: "messages-long-context", name: "messages call above the long-context threshold (modela-sonnet-5-5)", endpoint: "messages", model: "modela-sonnet-5-5", route: "standard", format: "messages",
			body: map[string]any{"model": "modela-sonnet-5-5", "max_tokens": 4096, "system": text(900000), "messages": user("Find the needle.")}, maxOutput: 4096},
	}
	dir := filepath.Join("..", "..", "testdata", "plugins", "tokens")
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			reqBody, err := json.Marshal(c.body)
			if err != nil {
				t.Fatal(err)
			}
			path := map[string]string{"chat_completions": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}[c.endpoint]
			var body []byte
			for i := 0; i <= c.repeat; i++ {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(reqBody))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("vendorx-version", "2026-09-19")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("status %d, %v", resp.StatusCode, err)
				}
			}
			stream, _ := c.body["stream"].(bool)
			f := fixture.Fixture{
				Path: filepath.Join(dir, c.file+".json"),
				Name: c.name, Op: fixture.OpCall, Endpoint: c.endpoint, Model: c.model, Route: c.route, Now: recordNow,
				Admit: &fixture.Admit{
					// The host's conservative estimate: a quarter of the body's bytes.
					InputTokens:         pricing.EstimateTokens(len(reqBody)),
					MaxOutputTokens:     c.maxOutput,
					DefaultOutputTokens: 4096,
					Stream:              stream,
				},
				Upstream: &fixture.Upstream{Format: c.format, Body: string(body)},
			}
			if err := f.Save(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
