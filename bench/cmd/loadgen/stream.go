package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// streamResult is one streamed call, timed from just before the request
// is sent.
type streamResult struct {
	start  time.Time
	ttfb   time.Duration // until the first complete event
	total  time.Duration // until data: [DONE]
	code   int
	events int
	err    error
}

// streamOnce makes one streamed call and reads it to its end.
func streamOnce(ctx context.Context, c *http.Client, t target, body []byte) streamResult {
	r := streamResult{start: time.Now()}
	req, err := http.NewRequestWithContext(ctx, "POST", t.URL+chatPath, bytes.NewReader(body))
	if err != nil {
		r.err = err
		return r
	}
	req.Header = headers(t)
	resp, err := c.Do(req)
	if err != nil {
		r.err = err
		r.ttfb = time.Since(r.start)
		r.total = r.ttfb
		return r
	}
	defer resp.Body.Close()
	r.code = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		r.err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
		r.ttfb = time.Since(r.start)
		r.total = r.ttfb
		return r
	}
	sse := newSSEReader(resp.Body)
	for {
		data, err := sse.Next()
		if err != nil {
			if err == io.EOF {
				err = errNoDone
			}
			r.err = err
			break
		}
		if r.events == 0 {
			r.ttfb = time.Since(r.start)
		}
		r.events++
		if string(data) == "[DONE]" {
			break
		}
	}
	r.total = time.Since(r.start)
	if r.err == nil {
		// Read to the end (the last chunk of the encoding), as a
		// well-behaved client does, so that the connection is reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	}
	if r.events == 0 {
		r.ttfb = r.total
	}
	return r
}

// toResults turns a stream into vegeta results for its TTFB and its total
// time, so that vegeta's metrics summarise them.
func (r streamResult) toResults() (ttfb, total *vegeta.Result) {
	code := uint16(r.code)
	if r.err != nil && code == http.StatusOK {
		code = 0 // a 200 that did not end properly is a failure
	}
	e := errString(r.err)
	return &vegeta.Result{Timestamp: r.start, Latency: r.ttfb, Code: code, Error: e},
		&vegeta.Result{Timestamp: r.start, Latency: r.total, Code: code, Error: e}
}

// streamLoad starts streams at a constant rate (vegeta's pacer, open loop)
// for du and waits for all of them.
func (b *bench) streamLoad(ctx context.Context, c *http.Client, t target, du time.Duration) (ttfb, total *tally) {
	ttfb, total = &tally{}, &tally{}
	pacer := vegeta.ConstantPacer{Freq: b.s.StreamRate, Per: time.Second}
	body := streamBody(b.s.Model)
	results := make(chan streamResult, 64)
	var collected sync.WaitGroup
	collected.Add(1)
	go func() {
		defer collected.Done()
		for r := range results {
			a, z := r.toResults()
			ttfb.add(a)
			total.add(z)
		}
	}()
	var wg sync.WaitGroup
	began := time.Now()
	for hits := uint64(0); ctx.Err() == nil; hits++ {
		elapsed := time.Since(began)
		if elapsed >= du {
			break
		}
		wait, stop := pacer.Pace(elapsed, hits)
		if stop {
			break
		}
		time.Sleep(wait)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- streamOnce(ctx, c, t, body)
		}()
	}
	wg.Wait()
	close(results)
	collected.Wait()
	ttfb.close()
	total.close()
	return ttfb, total
}

// stream: streamed calls at StreamRate per second, every target, every round.
func (b *bench) stream(ctx context.Context, targets []target, res *Results) {
	clients := map[string]*http.Client{}
	for _, t := range targets {
		clients[t.Name] = newClient(0, 1024, b.s.Timeout)
	}
	defer func() {
		for _, c := range clients {
			c.CloseIdleConnections()
		}
	}()
	for round := 1; round <= b.s.Rounds; round++ {
		for _, t := range order(targets, round) {
			if ctx.Err() != nil {
				return
			}
			if b.s.Warmup > 0 {
				b.streamLoad(ctx, clients[t.Name], t, b.s.Warmup)
			}
			wait := func() {}
			if t.Name == "gateway" && round == 1 {
				wait = b.prof.cpu(ctx, "cpu-stream", b.s.StreamDuration)
			}
			stolen := b.stolen()
			a, z := b.streamLoad(ctx, clients[t.Name], t, b.s.StreamDuration)
			st := stolen()
			wait()
			errs := append(append([]string{}, a.all.Errors...), z.all.Errors...)
			r := StreamRun{Target: t.Name, Round: round, TTFB: a.lat(), Total: z.lat(), Success: a.all.Success,
				Streams: a.all.Requests, Stolen: st, Errors: firstErrors(dedup(errs))}
			res.Stream = append(res.Stream, r)
			b.logf("stream round %d %-8s ttfb p50 %v p99 %v total p50 %v p99 %v success %.4f (%d streams)",
				round, t.Name, r.TTFB.P50, r.TTFB.P99, r.Total.P50, r.Total.P99, r.Success, r.Streams)
			b.pause(ctx)
		}
	}
}

func dedup(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// rss holds OpenStreams streams open against each hold target and samples
// its process's VmRSS while they are.
func (b *bench) rss(ctx context.Context, hold []target, res *Results) {
	for _, t := range hold {
		if ctx.Err() != nil {
			return
		}
		r := b.openStreams(ctx, t)
		res.RSS = append(res.RSS, r)
		b.logf("rss %-8s %d/%d streams open (%d failed) in %v: VmRSS %d MiB before, %d MiB during; VmHWM %d MiB",
			t.Name, r.Opened, r.Streams, r.Failed, r.OpenTime.Round(time.Millisecond), r.Before>>20, r.During>>20, r.HWM>>20)
		// Let the process settle the cancelled streams before the next target.
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// openStreams opens OpenStreams streams on t at OpenRate, samples t's
// memory while they are open, then ends them.
func (b *bench) openStreams(ctx context.Context, t target) RSSRun {
	r := RSSRun{Target: t.Name, Streams: b.s.OpenStreams}
	if m, err := readMemStatus(t.PID); err == nil {
		r.Before = m.RSS
	} else {
		r.Errors = append(r.Errors, err.Error())
	}
	c := newClient(0, b.s.OpenStreams, 0) // no client timeout: the streams are cancelled below
	defer c.CloseIdleConnections()
	sctx, cancel := context.WithCancel(ctx)
	h := &streamHolder{ctx: sctx, c: c, t: t, body: streamBody(b.s.Model),
		events: make(chan error, b.s.OpenStreams), ended: make(chan string, b.s.OpenStreams)}

	began := time.Now()
	pacer := vegeta.ConstantPacer{Freq: b.s.OpenRate, Per: time.Second}
	for i := 0; i < b.s.OpenStreams && sctx.Err() == nil; i++ {
		wait, _ := pacer.Pace(time.Since(began), uint64(i))
		time.Sleep(wait)
		h.wg.Add(1)
		go h.hold()
	}
	errs := map[string]bool{}
	b.awaitOpen(ctx, h.events, &r, errs)
	r.OpenTime = time.Since(began)
	sampleRSS(ctx, t.PID, &r, errs)
	r.OpenNow = int(h.open.Load())
	if t.Name == "gateway" {
		b.prof.snapshot(ctx, "heap", "heap-open-streams.pprof")
		b.prof.snapshot(ctx, "heap?debug=1", "heap-open-streams.txt") // ends with runtime.MemStats
		b.prof.snapshot(ctx, "goroutine?debug=1", "goroutines-open-streams.txt")
	}
	cancel()
	h.wg.Wait()
	close(h.ended)
	for e := range h.ended {
		errs[e] = true
	}
	for e := range errs {
		r.Errors = append(r.Errors, e)
	}
	r.Errors = firstErrors(r.Errors)
	return r
}

// streamHolder opens streams on one target and holds each open until its
// context is cancelled.
type streamHolder struct {
	ctx    context.Context // cancelled to end every stream
	c      *http.Client
	t      target
	body   []byte
	events chan error  // one per stream: nil once it is open, else why it failed
	ended  chan string // why a stream ended while it was held open
	open   atomic.Int64
	wg     sync.WaitGroup
}

// hold opens one stream, says on h.events whether it opened, and reads it
// until h.ctx is cancelled.
func (h *streamHolder) hold() {
	defer h.wg.Done()
	req, err := http.NewRequestWithContext(h.ctx, "POST", h.t.URL+chatPath, bytes.NewReader(h.body))
	if err != nil {
		h.events <- err
		return
	}
	req.Header = headers(h.t)
	resp, err := h.c.Do(req)
	if err != nil {
		h.events <- err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		h.events <- fmt.Errorf("HTTP %d", resp.StatusCode)
		return
	}
	sse := newSSEReader(resp.Body)
	if _, err := sse.Next(); err != nil {
		h.events <- fmt.Errorf("first event: %w", err)
		return
	}
	h.open.Add(1)
	defer h.open.Add(-1)
	h.events <- nil
	for {
		data, err := sse.Next()
		if h.ctx.Err() != nil {
			return
		}
		if err != nil {
			h.ended <- fmt.Sprintf("a stream ended while held open: %v", err)
			return
		}
		if string(data) == "[DONE]" {
			h.ended <- "a stream ended (data: [DONE]) while held open: the provider's stream is too short"
			return
		}
	}
}

// awaitOpen counts the streams opened and failed into r, up to OpenStreams
// of them, for at most OpenTimeout; errs gathers why they failed.
func (b *bench) awaitOpen(ctx context.Context, events <-chan error, r *RSSRun, errs map[string]bool) {
	deadline := time.NewTimer(b.s.OpenTimeout)
	defer deadline.Stop()
	for r.Opened+r.Failed < b.s.OpenStreams {
		select {
		case err := <-events:
			if err != nil {
				r.Failed++
				errs[err.Error()] = true
			} else {
				r.Opened++
			}
		case <-deadline.C:
			r.Errors = append(r.Errors, fmt.Sprintf("only %d of %d streams open after %v", r.Opened, b.s.OpenStreams, b.s.OpenTimeout))
			return
		case <-ctx.Done():
			return
		}
	}
}

// sampleRSS samples the memory of process pid while the streams are open:
// 8 samples, 250 ms apart; r keeps the largest, split by smaps.
func sampleRSS(ctx context.Context, pid int, r *RSSRun, errs map[string]bool) {
	for i := 0; i < 8 && ctx.Err() == nil; i++ {
		if m, err := readMemStatus(pid); err == nil {
			if m.RSS > r.During {
				r.During, r.Anon, r.File = m.RSS, m.Anon, m.File
				r.Parts = nil // a split of an older sample would be mislabelled
				if parts, err := readSmaps(pid); err == nil {
					r.Parts = &parts
				} else {
					errs["smaps: "+err.Error()] = true // once, with the streams' own errors
				}
			}
			r.HWM = m.HWM
		}
		time.Sleep(250 * time.Millisecond)
	}
}
