package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

const chatPath = "/v1/chat/completions"

// Results is everything one run measured.
type Results struct {
	Started    time.Time       `json:"started"`
	Settings   Settings        `json:"settings"`
	Age        []AgeRun        `json:"age,omitempty"`
	Latency    []LatencyRun    `json:"latency,omitempty"`
	Throughput []ThroughputRun `json:"throughput,omitempty"`
	Serial     []SerialRun     `json:"serial,omitempty"`
	Stream     []StreamRun     `json:"stream,omitempty"`
	RSS        []RSSRun        `json:"rss,omitempty"`
	Peak       []PeakRSS       `json:"peak,omitempty"`
	Jitter     *Lat            `json:"jitter,omitempty"` // timer wake-up lateness on loadgen's CPU
	Micro      *Micro          `json:"micro,omitempty"`
}

// Lat is a latency distribution's summary.
type Lat struct {
	P50 time.Duration `json:"p50"`
	P90 time.Duration `json:"p90"`
	P99 time.Duration `json:"p99"`
	Max time.Duration `json:"max"`
}

func latOf(m *vegeta.Metrics) Lat {
	return Lat{P50: m.Latencies.P50, P90: m.Latencies.P90, P99: m.Latencies.P99, Max: m.Latencies.Max}
}

// tally summarises results: vegeta's metrics over all of them (success,
// throughput, errors), and over the answered ones (2xx) for the latencies,
// so that calls refused at once (the gateway's 503 overloaded) do not
// flatter a target's percentiles.
// With record, it also keeps every answered call's start and latency, for
// clearOf.
type tally struct {
	all, answered vegeta.Metrics
	record        bool
	calls         []call
}

func (t *tally) add(r *vegeta.Result) {
	t.all.Add(r)
	if r.Code >= 200 && r.Code < 300 {
		t.answered.Add(r)
		if t.record {
			t.calls = append(t.calls, call{start: r.Timestamp, lat: r.Latency})
		}
	}
}

func (t *tally) close() {
	t.all.Close()
	t.answered.Close()
}

// lat is the answered calls' latencies.
func (t *tally) lat() Lat { return latOf(&t.answered) }

// LatencyRun is one fixed-rate measurement.
type LatencyRun struct {
	Target   string   `json:"target"`
	Rate     int      `json:"rate"`
	Round    int      `json:"round"`
	Lat      Lat      `json:"latency"`
	Success  float64  `json:"success"`
	Requests uint64   `json:"requests"`
	Sent     float64  `json:"sent_per_s"`             // the rate vegeta achieved
	Stolen   *float64 `json:"sut_stolen,omitempty"`   // share of the window stolen from the SUT CPU (-sut-cpu)
	Clear    *Clear   `json:"clear,omitempty"`        // the calls no stall touched (-sut-cpu, -load-cpu)
	CPU      *CPU     `json:"cpu_per_call,omitempty"` // CPU time per call of the hop and the provider (-sim-pid)
	GC       *GC      `json:"gc,omitempty"`           // the gateway's collections and bytes allocated per call
	Errors   []string `json:"errors,omitempty"`
}

// ThroughputRun is one as-fast-as-possible measurement.
type ThroughputRun struct {
	Target     string   `json:"target"`
	Round      int      `json:"round"`
	Throughput float64  `json:"throughput"` // successful requests/s
	Success    float64  `json:"success"`
	Requests   uint64   `json:"requests"`
	Lat        Lat      `json:"latency"`
	Stolen     *float64 `json:"sut_stolen,omitempty"`
	Errors     []string `json:"errors,omitempty"`
}

// StreamRun is one streaming measurement.
type StreamRun struct {
	Target  string   `json:"target"`
	Round   int      `json:"round"`
	TTFB    Lat      `json:"ttfb"`
	Total   Lat      `json:"total"`
	Success float64  `json:"success"`
	Streams uint64   `json:"streams"`
	Stolen  *float64 `json:"sut_stolen,omitempty"`
	Errors  []string `json:"errors,omitempty"`
}

// RSSRun is the memory of one process while many streams are open.
type RSSRun struct {
	Target   string        `json:"target"`
	Streams  int           `json:"streams"`             // asked for
	Opened   int           `json:"opened"`              // got their first event
	Failed   int           `json:"failed"`              // ended before being counted open
	OpenNow  int           `json:"open_now"`            // still open after the last sample
	OpenTime time.Duration `json:"open_time"`           // until the last one opened
	Before   int64         `json:"rss_before"`          // VmRSS before opening, bytes
	During   int64         `json:"rss_during"`          // highest sampled VmRSS while open, bytes
	Anon     int64         `json:"rss_anon"`            // RssAnon of that sample
	File     int64         `json:"rss_file"`            // RssFile of that sample
	Parts    *rssParts     `json:"rss_parts,omitempty"` // that sample's smaps, by kind of mapping
	HWM      int64         `json:"hwm"`                 // VmHWM after sampling, bytes
	Errors   []string      `json:"errors,omitempty"`
}

// PeakRSS is a process's VmHWM (and VmRSS) after a phase.
type PeakRSS struct {
	Process string `json:"process"`
	Phase   string `json:"phase"`
	HWM     int64  `json:"hwm"`
	RSS     int64  `json:"rss"`
	Anon    int64  `json:"rss_anon"`
	File    int64  `json:"rss_file"`
}

// bench runs the phases.
type bench struct {
	s        Settings
	log      io.Writer
	prof     *profiler // nil: no profiles
	callsDir string    // "": keep no per-call record (-calls-dir)
	simPID   int       // the provider's process; 0: no CPU per call (-sim-pid)
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "loadgen: "+format+"\n", args...)
}

// chatBody is the small non-streaming call; streamBody the streamed one.
// Both ask for at most 64 output tokens: the reply (24 words) is never cut.
func chatBody(model string) []byte {
	return []byte(`{"model":` + strconv.Quote(model) + `,"messages":[{"role":"user","content":"Reply with a short greeting."}],"max_tokens":64}`)
}

func streamBody(model string) []byte {
	return []byte(`{"model":` + strconv.Quote(model) + `,"messages":[{"role":"user","content":"Reply with a short greeting."}],"max_tokens":64,"stream":true}`)
}

// headers are the headers of t's next call, with its next key.
func headers(t target) http.Header { return headersFor(t.key()) }

func headersFor(key string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	return h
}

// newClient is a keep-alive HTTP/1.1 client; maxConns 0 = unlimited.
func newClient(maxConns, idle int, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        0,
			MaxIdleConnsPerHost: idle,
			MaxConnsPerHost:     maxConns,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// order is the targets' order in round r (from 1), from a Williams design: a
// Latin square balanced for what runs before. Over n rounds (2n when n is
// odd) every target runs once in every position and right after every
// other target equally often, so that neither drift on the machine nor the
// target measured just before favours one target (a rotation keeps
// neighbours together: the A/A control would always follow the proxy).
func order(ts []target, r int) []target {
	n := len(ts)
	first := make([]int, n) // 0, 1, n-1, 2, n-2, …
	lo, hi := 1, n-1
	for i := 1; i < n; i++ {
		if i%2 == 1 {
			first[i], lo = lo, lo+1
		} else {
			first[i], hi = hi, hi-1
		}
	}
	rows := n
	if n%2 == 1 {
		rows = 2 * n // the square, then its rows reversed
	}
	row := (r - 1) % rows
	out := make([]target, n)
	for i := range n {
		out[i] = ts[(first[i]+row)%n]
	}
	if row >= n {
		slices.Reverse(out)
	}
	return out
}

func (b *bench) runAll(ctx context.Context, targets, hold []target, res *Results) error {
	if err := b.check(ctx, targets, true); err != nil {
		return err
	}
	if b.s.has("rss") {
		if err := b.check(ctx, hold, false); err != nil {
			return err
		}
	}
	procs := b.processes(targets, hold)
	b.peak(procs, "start", res)
	if b.s.Jitter > 0 {
		j := b.jitter(ctx, b.s.Jitter)
		res.Jitter = &j
		b.logf("timer jitter: p50 %v p99 %v max %v", j.P50, j.P99, j.Max)
	}
	for _, phase := range b.s.Phases {
		b.logf("phase %s", phase)
		switch phase {
		case "age":
			b.age(ctx, targets, res)
		case "latency":
			b.latency(ctx, targets, res)
		case "throughput":
			b.throughput(ctx, targets, res)
		case "serial":
			b.serial(ctx, targets, res)
		case "stream":
			b.stream(ctx, targets, res)
		case "rss":
			b.rss(ctx, hold, res)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		b.peak(procs, phase, res)
	}
	b.prof.snapshot(ctx, "allocs", "allocs-end.pprof")
	b.prof.snapshot(ctx, "heap", "heap-end.pprof")
	return nil
}

// stolen starts measuring the time the hypervisor steals from the CPU the
// systems under test run on (Settings.SUTCPU); the function it returns
// ends the measurement and gives the stolen share of the time since, or
// nil when it is not measured. A virtual CPU that is not running cannot
// answer: a stall of tens of milliseconds in a 5 s window sets a p99 at
// 1,000/s, for every target alike. The reading is in ticks of 10 ms, and
// the kernel charges a stall when the CPU runs again: a window of a few
// seconds can be charged with a stall that began just before it.
func (b *bench) stolen() func() *float64 {
	none := func() *float64 { return nil }
	if b.s.SUTCPU < 0 {
		return none
	}
	t0 := time.Now()
	s0, err := readSteal(b.s.SUTCPU)
	if err != nil {
		b.logf("steal: %v", err)
		return none
	}
	return func() *float64 {
		s1, err := readSteal(b.s.SUTCPU)
		if err != nil {
			b.logf("steal: %v", err)
			return nil
		}
		if s1 < s0 { // a counter that went back (a migrated VM): no reading
			b.logf("steal: cpu%d's counter went back from %d to %d ticks", b.s.SUTCPU, s0, s1)
			return nil
		}
		f := float64(s1-s0) * float64(time.Second/userHZ) / float64(max(time.Since(t0), 1))
		return &f
	}
}

// jitter measures how late 1 ms sleeps wake up on this CPU for du: the
// noise floor of every latency below (a busy or virtualised machine
// deschedules the load generator and the targets alike).
func (b *bench) jitter(ctx context.Context, du time.Duration) Lat {
	var m vegeta.Metrics
	for end := time.Now().Add(du); time.Now().Before(end) && ctx.Err() == nil; {
		t := time.Now()
		time.Sleep(time.Millisecond)
		m.Add(&vegeta.Result{Timestamp: t, Latency: max(0, time.Since(t)-time.Millisecond), Code: http.StatusOK})
	}
	m.Close()
	return latOf(&m)
}

// process is a process whose memory the report shows.
type process struct {
	name string
	pid  int
}

func (b *bench) processes(targets, hold []target) []process {
	var out []process
	for _, t := range targets {
		if t.PID > 0 {
			out = append(out, process{t.Name, t.PID})
		}
	}
	for _, t := range hold {
		if t.PID > 0 && t.Name != "gateway" {
			out = append(out, process{t.Name + " (slow streams)", t.PID})
		}
	}
	return out
}

func (b *bench) peak(procs []process, phase string, res *Results) {
	for _, p := range procs {
		m, err := readMemStatus(p.pid)
		if err != nil {
			b.logf("memory of %s: %v", p.name, err)
			continue
		}
		res.Peak = append(res.Peak, PeakRSS{Process: p.name, Phase: phase, HWM: m.HWM, RSS: m.RSS, Anon: m.Anon, File: m.File})
	}
}

// check makes one plain and one streamed call to every target: a
// misconfigured target fails the run here, with its answer, instead of
// producing a table of errors. Without wholeStream only the stream's first
// event is awaited (the slow-stream provider takes a minute per stream).
func (b *bench) check(ctx context.Context, targets []target, wholeStream bool) error {
	c := newClient(0, 4, b.s.Timeout)
	defer c.CloseIdleConnections()
	for _, t := range targets {
		req, err := http.NewRequestWithContext(ctx, "POST", t.URL+chatPath, bytes.NewReader(chatBody(b.s.Model)))
		if err != nil {
			return err
		}
		req.Header = headers(t)
		resp, err := c.Do(req)
		if err != nil {
			return fmt.Errorf("%s: %w", t.Name, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s (%s): HTTP %d: %s", t.Name, t.URL, resp.StatusCode, bytes.TrimSpace(body))
		}
		if err := checkStream(ctx, c, t, streamBody(b.s.Model), wholeStream); err != nil {
			return fmt.Errorf("%s (%s): stream: %w", t.Name, t.URL, err)
		}
	}
	return nil
}

func checkStream(ctx context.Context, c *http.Client, t target, body []byte, whole bool) error {
	if whole {
		return streamOnce(ctx, c, t, body).err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", t.URL+chatPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = headers(t)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
	}
	_, err = newSSEReader(resp.Body).Next()
	return err
}

// attack runs one vegeta attack and summarises it; with record, the tally
// keeps every answered call. rate.Freq 0 is as fast as workers allow (then
// workers must equal maxWorkers).
func (b *bench) attack(ctx context.Context, c *http.Client, t target, rate vegeta.Rate, du time.Duration, workers, maxWorkers uint64, record bool) *tally {
	a := vegeta.NewAttacker(
		vegeta.Client(c),
		vegeta.Workers(workers),
		vegeta.MaxWorkers(maxWorkers),
		vegeta.MaxBody(0), // read and discard bodies; keep none
	)
	// One vegeta target per key: the static targeter takes them in turn.
	keys := t.Keys
	if len(keys) < 2 {
		keys = []string{t.Key}
	}
	vts := make([]vegeta.Target, len(keys))
	for i, k := range keys {
		vts[i] = vegeta.Target{Method: "POST", URL: t.URL + chatPath, Body: chatBody(b.s.Model), Header: headersFor(k)}
	}
	tr := vegeta.NewStaticTargeter(vts...)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			a.Stop()
		case <-done:
		}
	}()
	m := tally{record: record}
	for r := range a.Attack(tr, rate, du, t.Name) {
		m.add(r)
	}
	m.close()
	return &m
}

func firstErrors(errs []string) []string {
	if len(errs) > 5 {
		errs = errs[:5]
	}
	return errs
}

func (b *bench) pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(b.s.Pause):
	}
}

// latency: every rate, every target, every round; warm-up at the rate first.
func (b *bench) latency(ctx context.Context, targets []target, res *Results) {
	clients := map[string]*http.Client{}
	for _, t := range targets {
		clients[t.Name] = newClient(0, int(min(b.s.MaxWorkers, 4096)), b.s.Timeout)
	}
	defer func() {
		for _, c := range clients {
			c.CloseIdleConnections()
		}
	}()
	for round := 1; round <= b.s.Rounds; round++ {
		for _, rate := range b.s.Rates {
			for _, t := range order(targets, round) {
				if ctx.Err() != nil {
					return
				}
				pacer := vegeta.Rate{Freq: rate, Per: time.Second}
				if b.s.Warmup > 0 {
					b.attack(ctx, clients[t.Name], t, pacer, b.s.Warmup, 16, b.s.MaxWorkers, false)
				}
				wait := func() {}
				if t.Name == "gateway" && round == 1 {
					wait = b.prof.cpu(ctx, fmt.Sprintf("cpu-latency-%d", rate), b.s.Duration)
				}
				gc := b.gcMeter(ctx, t) // first: the scrape's own CPU stays out of cpu's window
				stolen := b.stolen()
				cpu := b.cpuMeter(t)
				stalls := watchStalls(b.s.stallCPUs())
				m := b.attack(ctx, clients[t.Name], t, pacer, b.s.Duration, 16, b.s.MaxWorkers, stalls != nil || b.callsDir != "")
				spans, ticks, err := stalls.end()
				perCall := cpu(m.all.Requests)
				gcs := gc()
				st := stolen()
				wait()
				if b.callsDir != "" {
					name := filepath.Join(b.callsDir, fmt.Sprintf("latency-%d-%s-%d.csv", rate, t.Name, round))
					if err := writeCalls(name, m.calls); err != nil {
						b.logf("calls: %v", err)
					}
				}
				r := LatencyRun{Target: t.Name, Rate: rate, Round: round, Lat: m.lat(), Success: m.all.Success,
					Requests: m.all.Requests, Sent: m.all.Rate, Stolen: st, CPU: perCall, GC: gcs, Errors: firstErrors(m.all.Errors)}
				if err != nil {
					b.logf("stalls: %v", err)
				} else if stalls != nil {
					r.Clear = clearOf(m.calls, spans, ticks)
				}
				res.Latency = append(res.Latency, r)
				b.logf("latency round %d %5d/s %-8s p50 %v p99 %v max %v success %.4f sent %.0f/s%s%s%s",
					round, rate, t.Name, r.Lat.P50, r.Lat.P99, r.Lat.Max, r.Success, r.Sent, r.CPU.summary(), r.GC.summary(r.Requests), r.Clear.summary())
				b.pause(ctx)
			}
		}
	}
}

// throughput: as fast as Conns workers on Conns connections can go.
func (b *bench) throughput(ctx context.Context, targets []target, res *Results) {
	n := uint64(b.s.Conns)
	for round := 1; round <= b.s.Rounds; round++ {
		for _, t := range order(targets, round) {
			if ctx.Err() != nil {
				return
			}
			c := newClient(b.s.Conns, b.s.Conns, b.s.Timeout)
			if b.s.Warmup > 0 {
				b.attack(ctx, c, t, vegeta.Rate{}, b.s.Warmup, n, n, false)
			}
			wait := func() {}
			if t.Name == "gateway" && round == 1 {
				wait = b.prof.cpu(ctx, "cpu-throughput", b.s.TPDuration)
			}
			stolen := b.stolen()
			m := b.attack(ctx, c, t, vegeta.Rate{}, b.s.TPDuration, n, n, false)
			st := stolen()
			wait()
			c.CloseIdleConnections()
			r := ThroughputRun{Target: t.Name, Round: round, Throughput: m.all.Throughput, Success: m.all.Success,
				Requests: m.all.Requests, Lat: m.lat(), Stolen: st, Errors: firstErrors(m.all.Errors)}
			res.Throughput = append(res.Throughput, r)
			b.logf("throughput round %d %-8s %.0f/s success %.4f p50 %v p99 %v", round, t.Name, r.Throughput, r.Success, r.Lat.P50, r.Lat.P99)
			b.pause(ctx)
		}
	}
}

// errString is "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

var errNoDone = errors.New("stream ended without data: [DONE]")
