package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Lines written concurrently arrive whole, in the background within about
// one interval, and everything is out after Close; writes after Close still
// go through.
func TestLogSink(t *testing.T) {
	var mu sync.Mutex
	var b bytes.Buffer
	out := syncBuffer{mu: &mu, b: &b}
	read := func() string { mu.Lock(); defer mu.Unlock(); return b.String() }
	s := newLogSink(out, 20*time.Millisecond)
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
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(read(), "marker\n") {
		if time.Now().After(deadline) {
			t.Fatal("buffered lines were not flushed in the background")
		}
		time.Sleep(5 * time.Millisecond)
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
}
