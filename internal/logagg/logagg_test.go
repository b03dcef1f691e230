package logagg

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

const storm = "settle: the store is unavailable; retrying until it answers"

// output is a JSON log in memory, safe for concurrent writes.
type output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// lines decodes every line written so far.
func (o *output) lines(t *testing.T) []map[string]any {
	t.Helper()
	o.mu.Lock()
	text := o.b.String()
	o.mu.Unlock()
	var out []map[string]any
	for l := range strings.SplitSeq(strings.TrimSuffix(text, "\n"), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// newLog returns an aggregating JSON logger at level debug over a fresh
// output; the interval is every, so tests that flush by hand pass an hour.
func newLog(t *testing.T, every time.Duration) (*slog.Logger, *Handler, *output) {
	t.Helper()
	o := &output{}
	h := New(slog.NewJSONHandler(o, &slog.HandlerOptions{Level: slog.LevelDebug}), every)
	t.Cleanup(h.Close)
	return slog.New(h), h, o
}

// repeated is a line's "repeated" count, 0 when it has none.
func repeated(t *testing.T, m map[string]any) int {
	t.Helper()
	v, ok := m["repeated"]
	if !ok {
		return 0
	}
	f, ok := v.(float64)
	if !ok || f < 1 {
		t.Fatalf("repeated = %v in %v", v, m)
	}
	return int(f)
}

// A storm of one warning with a different request_id each is two lines: the
// first record whole, then a summary with the last record's attributes.
func TestStormIsTwoLines(t *testing.T) {
	t.Parallel()
	log, h, o := newLog(t, time.Hour)
	for i := range 10000 {
		log.Warn(storm, "request_id", fmt.Sprintf("r%05d", i))
	}
	if n := len(o.lines(t)); n != 1 {
		t.Fatalf("%d lines before the interval ended; want only the first", n)
	}
	h.Flush()
	lines := o.lines(t)
	if len(lines) != 2 {
		t.Fatalf("%d lines; want 2", len(lines))
	}
	first, sum := lines[0], lines[1]
	if first["msg"] != storm || first["level"] != "WARN" || first["request_id"] != "r00000" || first["repeated"] != nil {
		t.Fatalf("first line %v", first)
	}
	if sum["msg"] != storm || sum["level"] != "WARN" || sum["request_id"] != "r09999" ||
		repeated(t, sum) != 9999 || sum["interval"] != "1h0m0s" {
		t.Fatalf("summary %v", sum)
	}
}

// Different messages, and one message at different levels, are different
// kinds.
func TestKindsAreNotMerged(t *testing.T) {
	t.Parallel()
	log, h, o := newLog(t, time.Hour)
	for i := range 3 {
		log.Warn("a", "i", i)
		log.Warn("b", "i", i)
		log.Error("a", "i", i)
	}
	if n := len(o.lines(t)); n != 3 {
		t.Fatalf("%d lines before the interval ended; want 3", n)
	}
	h.Flush()
	got := map[string]int{}
	for _, m := range o.lines(t)[3:] {
		got[fmt.Sprint(m["level"], " ", m["msg"])] = repeated(t, m)
		if m["i"] != 2.0 {
			t.Fatalf("summary %v does not carry the last record's attributes", m)
		}
	}
	want := map[string]int{"WARN a": 2, "WARN b": 2, "ERROR a": 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("summaries %v; want %v", got, want)
	}
}

// Records below WARN are written at once, every one.
func TestInfoPassesThrough(t *testing.T) {
	t.Parallel()
	log, _, o := newLog(t, time.Hour)
	for i := range 1000 {
		log.Info("request", "request_id", i)
		log.Debug("detail", "request_id", i)
	}
	lines := o.lines(t)
	if len(lines) != 2000 {
		t.Fatalf("%d lines; want 2000", len(lines))
	}
	for _, m := range lines {
		if m["repeated"] != nil {
			t.Fatalf("line %v", m)
		}
	}
}

// The INFO path allocates nothing of its own.
func TestInfoPathAllocatesNothing(t *testing.T) {
	h := New(nopHandler{}, time.Hour)
	defer h.Close()
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	r.AddAttrs(slog.String("request_id", "r1"), slog.Int("status", 200))
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { _ = h.Handle(ctx, r) }); n != 0 {
		t.Fatalf("%v allocations per INFO record", n)
	}
}

type nopHandler struct{}

func (nopHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (nopHandler) Handle(context.Context, slog.Record) error { return nil }
func (h nopHandler) WithAttrs([]slog.Attr) slog.Handler      { return h }
func (h nopHandler) WithGroup(string) slog.Handler           { return h }

// After an interval ends, the first record of a kind passes through again,
// and an interval with nothing counted writes no summary.
func TestNextIntervalStartsFresh(t *testing.T) {
	t.Parallel()
	log, h, o := newLog(t, time.Hour)
	for i := range 3 {
		log.Warn(storm, "request_id", i)
	}
	h.Flush()
	log.Warn(storm, "request_id", 3)
	h.Flush()
	lines := o.lines(t)
	if len(lines) != 3 {
		t.Fatalf("%d lines; want first, summary, first again", len(lines))
	}
	if lines[0]["request_id"] != 0.0 || repeated(t, lines[1]) != 2 || lines[1]["request_id"] != 2.0 ||
		lines[2]["request_id"] != 3.0 || lines[2]["repeated"] != nil {
		t.Fatalf("lines %v", lines)
	}
}

// The ticker writes the summary of a storm that stopped within about one
// interval, without Flush.
func TestTickerWritesSummary(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const every = 20 * time.Millisecond
		log, _, o := newLog(t, every)
		for i := range 5 {
			log.Warn(storm, "request_id", i)
		}
		time.Sleep(2 * every) // the bubble's clock: the ticker fires twice at once
		synctest.Wait()
		lines := o.lines(t)
		total := 0
		for _, m := range lines {
			total += max(1, repeated(t, m))
		}
		if total != 5 {
			t.Fatalf("no summary from the ticker after two intervals: %v", lines)
		}
	})
}

// Loggers derived with With and WithGroup count with their parent, and
// each line keeps the attributes and groups of the logger that wrote its
// record; "repeated" and "interval" stay at the top level.
func TestDerivedHandlersShareCounts(t *testing.T) {
	t.Parallel()
	log, h, o := newLog(t, time.Hour)
	store := log.With("component", "store")
	http := log.With("component", "http")
	store.Warn(storm, "request_id", "1")
	http.Warn(storm, "request_id", "2")
	log.Warn(storm, "request_id", "3")
	http.Warn(storm, "request_id", "4")
	req := log.WithGroup("req").With("id", "x")
	req.Warn("slow", "n", 1)
	req.Warn("slow", "n", 2)
	h.Flush()
	lines := o.lines(t)
	if len(lines) != 4 {
		t.Fatalf("%d lines; want 4: %v", len(lines), lines)
	}
	if lines[0]["component"] != "store" || lines[0]["request_id"] != "1" {
		t.Fatalf("first line %v", lines[0])
	}
	if fmt.Sprint(lines[1]["req"]) != "map[id:x n:1]" {
		t.Fatalf("grouped first line %v", lines[1])
	}
	sum := lines[2]
	if sum["component"] != "http" || sum["request_id"] != "4" || repeated(t, sum) != 3 {
		t.Fatalf("summary %v", sum)
	}
	g := lines[3]
	if g["msg"] != "slow" || repeated(t, g) != 1 || g["interval"] != "1h0m0s" || fmt.Sprint(g["req"]) != "map[id:x n:2]" {
		t.Fatalf("grouped summary %v", g)
	}
}

// Writers on 8 goroutines, with intervals ending under them, lose nothing:
// the lines written plus the summaries' counts add up to the records logged.
func TestConcurrentCounts(t *testing.T) {
	t.Parallel()
	log, h, o := newLog(t, time.Millisecond)
	const writers, each = 8, 5000
	var wg sync.WaitGroup
	for g := range writers {
		l := log.With("writer", g)
		wg.Go(func() {
			for i := range each {
				l.Warn(fmt.Sprint("kind ", i%3), "i", i)
			}
		})
	}
	wg.Wait()
	h.Close()
	total := 0
	lines := o.lines(t)
	for _, m := range lines {
		total += max(1, repeated(t, m))
	}
	if total != writers*each {
		t.Fatalf("%d lines account for %d records; want %d", len(lines), total, writers*each)
	}
}

// Past MaxKeys kinds in an interval, further kinds fold into one overflow
// kind whose summary names the last one's message; the table stays bounded.
func TestOverflowKind(t *testing.T) {
	t.Parallel()
	log, h, o := newLog(t, time.Hour)
	const extra = 50
	for i := range MaxKeys + extra {
		log.Warn(fmt.Sprint("kind ", i), "i", i)
		log.Warn(fmt.Sprint("kind ", i), "i", i)
	}
	log.Error(fmt.Sprint("kind ", MaxKeys), "i", -1)
	if n := len(o.lines(t)); n != MaxKeys+1 {
		t.Fatalf("%d lines before the interval ended; want %d", n, MaxKeys+1)
	}
	h.agg.mu.Lock()
	kinds := len(h.agg.keys)
	h.agg.mu.Unlock()
	if kinds != MaxKeys+1 {
		t.Fatalf("%d kinds tracked; want %d", kinds, MaxKeys+1)
	}
	h.Flush()
	lines := o.lines(t)
	if len(lines) != 2*MaxKeys+2 {
		t.Fatalf("%d lines; want %d", len(lines), 2*MaxKeys+2)
	}
	last := lines[len(lines)-1]
	if last["msg"] != OverflowMessage || last["level"] != "ERROR" || repeated(t, last) != 2*extra ||
		last["last_msg"] != fmt.Sprint("kind ", MaxKeys) || last["i"] != -1.0 {
		t.Fatalf("overflow summary %v", last)
	}
}

// Close writes what is pending; after it records pass straight through,
// and a second Close does nothing.
func TestClose(t *testing.T) {
	t.Parallel()
	log, h, o := newLog(t, time.Hour)
	log.Warn(storm, "request_id", 1)
	log.Warn(storm, "request_id", 2)
	h.Close()
	log.Warn(storm, "request_id", 3)
	log.Warn(storm, "request_id", 4)
	h.Close()
	lines := o.lines(t)
	if len(lines) != 4 || repeated(t, lines[1]) != 1 || lines[2]["request_id"] != 3.0 || lines[3]["request_id"] != 4.0 {
		t.Fatalf("lines %v", lines)
	}
}

// A record carrying Each is written every time, and does not count towards
// its kind's summary; the same message without it still aggregates.
func TestEachIsWrittenEveryTime(t *testing.T) {
	t.Parallel()
	log, h, o := newLog(t, time.Hour)
	for i := range 100 {
		log.Error("uncharged", "request_id", fmt.Sprintf("r%03d", i), Each)
	}
	for range 10 {
		log.Error("uncharged")
	}
	h.Flush()
	lines := o.lines(t)
	if len(lines) != 102 {
		t.Fatalf("%d lines; want the 100 with Each, then the first without and its summary", len(lines))
	}
	for i, l := range lines[:100] {
		if l["request_id"] != fmt.Sprintf("r%03d", i) || l[EachKey] != true {
			t.Fatalf("line %d: %v", i, l)
		}
	}
	if repeated(t, lines[101]) != 9 {
		t.Fatalf("summary %v", lines[101])
	}
}
