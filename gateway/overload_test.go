package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/store"
)

// waitPlaces waits until n calls hold a max_concurrent place.
func waitPlaces(t *testing.T, e *env, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(e.gw.places) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d places taken after 10s, want %d", len(e.gw.places), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// overloadEnv is a gateway with one place for a call in progress, and a key
// of account "acme" on the economy route (sim "eco-a").
func overloadEnv(t *testing.T, queueWait time.Duration) (*env, string) {
	t.Helper()
	e := newEnv(t, func(c *Config) {
		c.Limits.MaxConcurrent = 1
		c.Limits.QueueWait = queueWait
	})
	e.account("acme", "10")
	return e, e.key("acme", "economy")
}

// Past limits.max_concurrent calls in progress, a call waits queue_wait and
// is refused with 503 "overloaded", Retry-After and the error shape, before
// anything is held or sent upstream; calls go through again once a place is
// free.
func TestOverloadedCallsAreRefused(t *testing.T) {
	e, key := overloadEnv(t, 20*time.Millisecond)
	e.sims["eco-a"].SetOptions(sim.Options{Latency: 400 * time.Millisecond})
	body := chatBody("modelf-flash", "hello", `"max_tokens":16`)

	var wg sync.WaitGroup
	wg.Go(func() {
		if status, _, b := e.do("POST", "/v1/chat/completions", key, body); status != 200 {
			t.Errorf("the call holding the place: %d %s", status, b)
		}
	})
	waitPlaces(t, e, 1)
	status, h, b := e.do("POST", "/v1/chat/completions", key, body)
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" {
		t.Fatalf("call over the limit: %d Retry-After %q %s", status, h.Get("Retry-After"), b)
	}
	var eb struct {
		Error struct {
			Message, Type string
			Code          any
		}
	}
	if err := json.Unmarshal(b, &eb); err != nil || eb.Error.Code != "overloaded" || eb.Error.Type != "service_unavailable_error" ||
		!strings.Contains(eb.Error.Message, "at capacity") || !strings.Contains(eb.Error.Message, h.Get("X-Request-Id")) {
		t.Errorf("error body %s", b)
	}
	wg.Wait()
	// Only the call that had the place is on the books.
	if a := e.balance("acme"); a.Held != 0 {
		t.Errorf("held %v after every call ended", a.Held)
	}
	entries, err := e.store.Charges(context.Background(), "acme", 10)
	if err != nil {
		t.Fatal(err)
	}
	charges := 0
	for _, en := range entries {
		if en.Kind == store.KindCharge {
			charges++
		}
	}
	if charges != 1 {
		t.Errorf("%d charges, want 1 (the refused call must not be charged): %+v", charges, entries)
	}
	e.sims["eco-a"].SetOptions(sim.Options{})
	if status, _, b := e.do("POST", "/v1/chat/completions", key, body); status != 200 {
		t.Errorf("after the place was freed: %d %s", status, b)
	}
	for _, ln := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(ln, "request failed") && strings.Contains(ln, "at capacity") {
			t.Errorf("a refusal for overload was logged as a failure: %s", ln)
		}
	}
	if _, _, m := e.do("GET", "/metrics", "", nil); !bytes.Contains(m, []byte("relay_overloaded_total 1")) {
		t.Error("relay_overloaded_total does not count the refusal")
	}
	waitPlaces(t, e, 0)
}

// A call over the limit waits for a place up to queue_wait rather than
// failing at once.
func TestOverloadQueueWaits(t *testing.T) {
	e, key := overloadEnv(t, 5*time.Second)
	e.sims["eco-a"].SetOptions(sim.Options{Latency: 100 * time.Millisecond})
	body := chatBody("modelf-flash", "hello", `"max_tokens":16`)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if status, _, b := e.do("POST", "/v1/chat/completions", key, body); status != 200 {
				t.Errorf("queued call: %d %s", status, b)
			}
		})
	}
	wg.Wait()
}

// An open stream gives its place back once its answer starts: with one
// place, a stream left open does not block the next call.
func TestOpenStreamFreesItsPlace(t *testing.T) {
	e, key := overloadEnv(t, 20*time.Millisecond)
	e.sims["eco-a"].SetOptions(sim.Options{ChunkGap: 300 * time.Millisecond, Chunks: 4})
	req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions",
		strings.NewReader(chatBody("modelf-flash", "hello", `"max_tokens":16`, `"stream":true`)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if resp.StatusCode != 200 || err != nil || !strings.HasPrefix(line, "data:") {
		t.Fatalf("stream: %d %q %v", resp.StatusCode, line, err)
	}
	waitPlaces(t, e, 0)
	e.sims["eco-a"].SetOptions(sim.Options{})
	if status, _, b := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hi", `"max_tokens":16`)); status != 200 {
		t.Errorf("a call while a stream is open: %d %s", status, b)
	}
}
