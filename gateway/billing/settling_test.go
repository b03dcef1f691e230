package billing

import (
	"context"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/internal/testwait"
)

func TestSettlingWait(t *testing.T) {
	t.Parallel()
	s := newSettling()
	ctx := context.Background()
	s.wait(ctx, "acme") // nothing pending: returns at once

	waitIn := func() chan struct{} {
		done := make(chan struct{})
		go func() { s.wait(ctx, "acme"); close(done) }()
		return done
	}
	sealed := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.m["acme"].open == nil
	}
	still := func(done chan struct{}, what string) {
		t.Helper()
		select {
		case <-done:
			t.Fatalf("%s returned with a call it covers still settling", what)
		case <-time.After(20 * time.Millisecond):
		}
	}

	a := s.begin("acme")
	b := s.begin("acme")
	other := s.begin("zeta")
	first := waitIn()
	testwait.For(t, 15*time.Second, "the wait sealed its group", sealed)
	// A call that begins after the first wait does not prolong it, but a
	// second wait covers it and the first wait's calls too.
	late := s.begin("acme")
	if late == a {
		t.Fatal("a call after a wait joined the sealed group")
	}
	second := waitIn()
	testwait.For(t, 15*time.Second, "the wait sealed its group", sealed)
	s.end("acme", a)
	still(first, "the first wait")
	s.end("acme", b)
	<-first
	still(second, "the second wait")
	s.end("acme", late)
	<-second
	s.end("zeta", other)
	if len(s.m) != 0 {
		t.Fatalf("groups left after every call ended: %v", s.m)
	}

	// A cancelled context ends the wait.
	p := s.begin("acme")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	s.wait(cctx, "acme")
	s.end("acme", p)
}
