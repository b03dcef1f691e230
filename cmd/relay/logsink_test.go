package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Lines written concurrently arrive whole, in the background within about
// one interval, and everything is out after Close; writes after Close still
// go through.
func TestLogSink(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var b bytes.Buffer
		out := syncBuffer{mu: &mu, b: &b}
		read := func() string { mu.Lock(); defer mu.Unlock(); return b.String() }
		const every = 20 * time.Millisecond
		s := newLogSink(out, every)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 500 {
					fmt.Fprintf(s, "goroutine %d line %d %s\n", g, i, strings.Repeat("x", 40))
				}
			})
		}
		wg.Wait()
		s.Write([]byte("marker\n"))
		time.Sleep(every) // the bubble's clock: one interval passes at once
		synctest.Wait()
		if !strings.Contains(read(), "marker\n") {
			t.Fatal("buffered lines were not flushed in the background within one interval")
		}
		s.Close()
		s.Close()
		s.Write([]byte("after close\n"))
		lines := strings.Split(strings.TrimSuffix(read(), "\n"), "\n")
		if len(lines) != 4*500+2 || lines[len(lines)-1] != "after close" {
			t.Fatalf("%d lines, last %q", len(lines), lines[len(lines)-1])
		}
		for _, l := range lines[:len(lines)-2] {
			if !strings.HasPrefix(l, "goroutine ") || !strings.HasSuffix(l, strings.Repeat("x", 40)) {
				t.Fatalf("torn line %q", l)
			}
		}
	})
}

// The process logger aggregates a storm of one warning: 5,000 of them with
// different request ids are the first one and one summary with the count,
// written by the time the close function returns; access-log lines at INFO
// are all written.
func TestLoggerAggregatesWarnings(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var b bytes.Buffer
	log, closeLog, err := newLoggerTo(syncBuffer{mu: &mu, b: &b}, "info")
	if err != nil {
		t.Fatal(err)
	}
	const msg = "settle: the store is unavailable; retrying until it answers"
	for i := range 5000 {
		log.Warn(msg, "request_id", fmt.Sprintf("r%04d", i))
	}
	for i := range 3 {
		log.Info("request", "request_id", i)
	}
	closeLog()
	mu.Lock()
	text := b.String()
	mu.Unlock()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) > 5 {
		t.Fatalf("%d lines (%d bytes) for 5,000 identical warnings and 3 requests", len(lines), len(text))
	}
	var warned, repeated, requests int
	for _, l := range lines {
		var m struct {
			Msg      string `json:"msg"`
			Repeated int    `json:"repeated"`
			Interval string `json:"interval"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		switch {
		case m.Msg == "request":
			requests++
		case m.Msg == msg && m.Repeated > 0 && m.Interval == "10s":
			repeated += m.Repeated
		case m.Msg == msg:
			warned++
		default:
			t.Fatalf("line %q", l)
		}
	}
	if warned+repeated != 5000 || requests != 3 {
		t.Fatalf("%d warnings written and %d counted, %d requests; want 5,000 in all and 3:\n%s", warned, repeated, requests, text)
	}
}
