package gateway

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/config"
)

// BenchmarkOverhead measures one small non-streaming chat call, one at a
// time, three ways in the same run: straight to the sim, through a bare
// httputil.ReverseProxy (the floor), and through the gateway (auth, plugins,
// Badger hold + settle, relay). Gateway − direct is our added latency;
// compare it with proxy − direct.
func BenchmarkOverhead(b *testing.B) {
	envLogLevel = slog.LevelInfo // production's level: access log on, debug off
	defer func() { envLogLevel = slog.LevelDebug }()
	e := newEnv(b)
	e.logs.discard.Store(true)
	e.account("bench", "1000000")
	key := e.key("bench", "economy")
	simURL := e.simURLs["eco-a"]
	target, _ := url.Parse(simURL)
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }})
	defer proxy.Close()
	body := []byte(chatBody("modelf-flash", "benchmark me", `"max_tokens":16`))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

	run := func(b *testing.B, base, key string) {
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest("POST", base+"/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { run(b, simURL, "") })
	b.Run("proxy", func(b *testing.B) { run(b, proxy.URL, "") })
	b.Run("gateway", func(b *testing.B) { run(b, e.url, key) })
}

// BenchmarkSharedOverhead measures one small non-streaming chat call through
// the gateway without Redis and with it (RELAY_TEST_REDIS): the shared rate
// limit and the read-after-answer record cost a Redis round trip or two per
// call; a line's cooldown check costs none.
func BenchmarkSharedOverhead(b *testing.B) {
	envLogLevel = slog.LevelInfo
	defer func() { envLogLevel = slog.LevelDebug }()
	run := func(b *testing.B, opts ...envOption) {
		e := newEnv(b, opts...)
		e.logs.discard.Store(true)
		e.account("bench", "1000000")
		key := e.key("bench", "economy")
		body := []byte(chatBody("modelf-flash", "benchmark me", `"max_tokens":16`))
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	}
	b.Run("local", func(b *testing.B) { run(b) })
	b.Run("redis", func(b *testing.B) {
		u := os.Getenv(testRedisVar)
		if u == "" {
			b.Skipf("%s is not set", testRedisVar)
		}
		prefix := "relaybench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
		b.Cleanup(func() { dropPrefixURL(u, prefix) })
		run(b, func(c *config.Config) { c.Redis.URL, c.Redis.Prefix = u, prefix })
	})
}
