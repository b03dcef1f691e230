// Package logagg aggregates repeated warnings and errors in a log: a
// slog.Handler wrapper (New) that writes the first record of a kind in an
// interval and, at the interval's end, one summary line with how many more
// there were, instead of every one.
//
// Why: in a metastable storm every request fails the same way and logs the
// same warning ("settle: the store is unavailable; retrying until it
// answers", 25,000 a minute, each with its own request_id). One storm wrote
// 244 MB of identical warnings, which costs disk, log shipping and the
// operator's attention exactly when the gateway has none to spare. With
// aggregation the same storm writes two lines per kind per interval.
//
// What is aggregated: records at slog.LevelWarn and above, keyed by (level,
// message); the attributes do not count, so the same warning about different
// requests is one kind, and a logger derived with With or WithGroup shares
// its parent's counts. Within an interval:
//
//   - The first record of a kind passes through unchanged, at once.
//   - Later records of that kind are counted, not written. The last one is
//     kept, with the handler that received it.
//   - When the interval ends (a background ticker, or Flush or Close), each
//     kind with counted records gets one summary line: the last counted
//     record (its time, level, message and attributes, written through the
//     handler that received it, so a derived logger's attributes and groups
//     are kept) plus the top-level attributes "repeated" (how many records
//     were counted, not counting the first) and "interval" ("10s"). Then the
//     next interval starts empty: its first record of a kind passes through
//     again.
//
// Records below slog.LevelWarn (the access log at INFO, debug) pass straight
// to the wrapped handler: a level check, no lock, no allocation, no delay.
// So does a record carrying the attribute Each: a line each of which
// matters on its own.
//
// Memory is bounded: at most MaxKeys kinds are tracked per interval. Records
// of further kinds in that interval fold into one overflow kind: its first
// record passes through unchanged, the rest are counted, and its summary has
// the message OverflowMessage, the highest level folded, the attributes of
// the last folded record and "last_msg" (that record's message). So messages
// that vary (an http.Server error naming a client address) cannot turn a
// storm back into a line per record.
//
// A summary can follow the first record of the next interval in the output
// when the two race; each line's "time" is still that of its record.
//
// Call Close at shutdown, before the wrapped handler's sink is closed: it
// writes what is pending and stops the ticker. After Close records pass
// straight through.
package logagg

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// MaxKeys is the most kinds (level, message) tracked per interval; records
// of further kinds fold into the overflow kind.
const MaxKeys = 256

// Each is the attribute of a record that is written every time, never
// counted into a summary: a line each of which matters on its own (a call
// answered and left uncharged, whose request id reconciles the books).
var Each = slog.Bool(EachKey, true)

// EachKey is Each's key.
const EachKey = "logagg_each"

// OverflowMessage is the message of the overflow kind's summary.
const OverflowMessage = "logagg: records of kinds past the per-interval limit"

// Handler is a slog.Handler that aggregates repeated warnings and errors
// (see the package comment). Handlers derived with WithAttrs and WithGroup
// share its counts, its ticker, Flush and Close. It is safe for concurrent
// use.
type Handler struct {
	next    slog.Handler // root with this handler's attributes and groups
	root    slog.Handler // the handler New wrapped
	ops     []op         // WithAttrs and WithGroup calls from root to next
	grouped bool         // ops open a group
	agg     *aggregator
}

// op is one WithAttrs (attrs) or WithGroup (group) call.
type op struct {
	group string
	attrs []slog.Attr
}

type key struct {
	level    slog.Level
	msg      string
	overflow bool // the overflow kind; level and msg are zero
}

type entry struct {
	n     int         // records counted after the first
	last  slog.Record // the last counted record, cloned
	h     *Handler    // the handler that received last
	level slog.Level  // the highest level counted (for the overflow kind)
}

type aggregator struct {
	every  time.Duration
	mu     sync.Mutex
	keys   map[key]*entry // this interval's kinds; nil when none yet
	closed bool
	stop   chan struct{}
	done   chan struct{}
}

// New returns a Handler that writes to next and ends an interval every
// every (which must be positive, as for time.NewTicker). It starts a
// goroutine that Close stops.
func New(next slog.Handler, every time.Duration) *Handler {
	if every <= 0 {
		panic("logagg: non-positive interval")
	}
	a := &aggregator{every: every, stop: make(chan struct{}), done: make(chan struct{})}
	go a.run()
	return &Handler{next: next, root: next, agg: a}
}

// Enabled reports whether the wrapped handler handles records at level l.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

// Handle writes r, or counts it when it repeats a warning or error already
// written in this interval.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn || each(r) {
		return h.next.Handle(ctx, r)
	}
	if h.agg.count(h, r) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs returns a Handler with attrs added that shares h's counts.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return &Handler{
		next:    h.next.WithAttrs(attrs),
		root:    h.root,
		ops:     append(h.ops[:len(h.ops):len(h.ops)], op{attrs: slices.Clone(attrs)}),
		grouped: h.grouped,
		agg:     h.agg,
	}
}

// WithGroup returns a Handler with group name opened that shares h's counts.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &Handler{
		next:    h.next.WithGroup(name),
		root:    h.root,
		ops:     append(h.ops[:len(h.ops):len(h.ops)], op{group: name}),
		grouped: true,
		agg:     h.agg,
	}
}

// Flush ends the interval now: it writes the summary of every kind with
// counted records, and the next record of each kind passes through again.
// Errors of the wrapped handler are dropped, as slog.Logger drops them.
func (h *Handler) Flush() { h.agg.flush() }

// Close stops the ticker and flushes; later records pass straight through.
// It is safe to call more than once, from any derived handler.
func (h *Handler) Close() {
	a := h.agg
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	a.mu.Unlock()
	close(a.stop)
	<-a.done
	a.flush()
}

func (a *aggregator) run() {
	defer close(a.done)
	t := time.NewTicker(a.every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			a.flush()
		case <-a.stop:
			return
		}
	}
}

// count reports whether r, received by h, repeats a kind already written in
// this interval; if so it is counted and kept as the kind's last record.
func (a *aggregator) count(h *Handler, r slog.Record) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	k := key{level: r.Level, msg: r.Message}
	e, ok := a.keys[k]
	if !ok && len(a.keys) >= MaxKeys {
		k = key{overflow: true}
		e, ok = a.keys[k]
	}
	if !ok {
		if a.keys == nil {
			a.keys = make(map[key]*entry)
		}
		a.keys[k] = &entry{}
		return false
	}
	if e.n == 0 || r.Level > e.level {
		e.level = r.Level
	}
	e.n++
	e.last = r.Clone()
	e.h = h
	return true
}

// flush starts a new interval and writes the summaries of the one it ends,
// oldest last record first.
func (a *aggregator) flush() {
	a.mu.Lock()
	keys := a.keys
	a.keys = nil
	a.mu.Unlock()
	type pending struct {
		k key
		e *entry
	}
	var out []pending
	for k, e := range keys {
		if e.n > 0 {
			out = append(out, pending{k, e})
		}
	}
	slices.SortFunc(out, func(x, y pending) int { return x.e.last.Time.Compare(y.e.last.Time) })
	for _, p := range out {
		a.summarize(p.k, p.e)
	}
}

// summarize writes e's summary line through the handler that received its
// last record, with "repeated" and "interval" at the top level.
func (a *aggregator) summarize(k key, e *entry) {
	r := e.last
	extra := make([]slog.Attr, 0, 3)
	if k.overflow {
		r = slog.NewRecord(e.last.Time, e.level, OverflowMessage, e.last.PC)
		e.last.Attrs(func(at slog.Attr) bool { r.AddAttrs(at); return true })
		extra = append(extra, slog.String("last_msg", e.last.Message))
	}
	extra = append(extra, slog.Int("repeated", e.n), slog.String("interval", a.every.String()))
	h := e.h.next
	if e.h.grouped {
		// Attributes added to the record would land in the open group:
		// rebuild the handler with them added before its groups instead.
		h = e.h.root.WithAttrs(extra)
		for _, o := range e.h.ops {
			if o.attrs != nil {
				h = h.WithAttrs(o.attrs)
			} else {
				h = h.WithGroup(o.group)
			}
		}
	} else {
		r.AddAttrs(extra...)
	}
	_ = h.Handle(context.Background(), r)
}

// each reports whether r carries Each.
func each(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == EachKey && a.Value.Kind() == slog.KindBool && a.Value.Bool()
		return !found
	})
	return found
}
