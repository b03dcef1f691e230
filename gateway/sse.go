package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/wire"
	"github.com/modelrelay/modelrelay/wire/xlate"
)

// errStreamCut marks a stream that ended without its proper end; the handler
// aborts the client connection so the client sees the cut too.
var errStreamCut = errors.New("stream cut")

// relayStream relays an SSE answer event by event, flushing after each, and
// settles from the usage read out of the stream as it passes. For chat
// completions whose client did not ask for usage, the usage chunk the gateway
// asked for is removed (and the "usage":null member it adds to every chunk),
// so the client sees exactly what the provider would have sent it.
func (rl *relay) relayStream(ctx context.Context, w http.ResponseWriter, c *call, up *upstream) error {
	stripUsage := c.ep.name == pricing.EndpointChat && !c.sum.IncludeUsage
	meter, text := c.ep.meter(), c.ep.text
	var xs *xlate.Stream
	if p := up.line.Protocol(); c.translated(p) {
		rd := readerFor(lineShape(p))
		meter, text, stripUsage = rd.meter(), rd.text, false
		var err error
		if xs, err = xlate.NewStream(lineShape(p), c.ep.shape, c.x.req); err != nil {
			return apierr.Internal("translation", "%s", err.Error())
		}
	}
	// A read of this call's generation waits for its settle (or release).
	// A settle left to the background ends it there (SettleAnswered).
	c.ticket.BeginStream()
	defer c.ticket.EndStream()
	h := w.Header()
	rl.hdrs.copy(h, up.resp.Header)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(up.resp.StatusCode)
	res := rl.relayEvents(w, c, up, events{meter: meter, text: text, strip: stripUsage, x: xs})
	textBytes, events, readErr, writeErr, complete := res.textBytes, res.events, res.readErr, res.writeErr, res.complete
	u, ok := meter.Usage()
	note := ""
	if !ok {
		u = pricing.Usage{InputTokens: settleInputTokens(c.callerBytes), OutputTokens: pricing.EstimateTokens(textBytes)}
		switch {
		case writeErr != nil || ctx.Err() != nil:
			note = fmt.Sprintf("estimated: the client went away after %d events", events)
		case readErr != nil:
			note = fmt.Sprintf("estimated: the upstream stream was cut after %d events", events)
		default:
			note = fmt.Sprintf("estimated: the stream ended without usage after %d events", events)
		}
	}
	st := c.ticket.Price(ctx, u, note)
	if err := c.ticket.SettleAnswered(ctx, st); err != nil {
		rl.log.Error("stream settled with error", "request_id", c.info.rid, "error", err.Error())
	} else {
		c.info.charge = st.Charge.Fixed()
	}
	if readErr != nil {
		up.line.RecordFailure(rl.now(), fmt.Errorf("stream cut: %w", readErr))
	}
	if !complete && readErr != nil && writeErr == nil && ctx.Err() == nil {
		return errStreamCut
	}
	return nil
}

// streamResult is what relayEvents saw.
type streamResult struct {
	textBytes int   // generated text delivered, for the estimate
	events    int   // events written to the client
	readErr   error // the upstream stream broke
	writeErr  error // the client went away
	complete  bool  // the stream ended cleanly
}

// events is how relayEvents treats a stream's events: the meter and text
// count of the upstream's shape, chat's usage chunk stripped, and the
// translation into the caller's shape (nil: passed on as they come).
type events struct {
	meter wire.Meter
	text  func(data []byte) int
	strip bool
	x     *xlate.Stream
}

// relayEvents copies SSE events from upstream to the client one by one,
// flushing after each, feeding each to the meter; a translated stream's
// events are written as their translation.
func (rl *relay) relayEvents(w http.ResponseWriter, c *call, up *upstream, how events) streamResult {
	meter, stripUsage := how.meter, how.strip
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}

	var (
		rd        = wire.NewEventReader(up.resp.Body)
		textBytes int
		events    int
		writeErr  error
		readErr   error
	)
	emit := func(ev []byte) {
		if len(ev) == 0 {
			return
		}
		name, data := wire.ParseEvent(ev)
		out := ev
		if stripUsage && data != nil {
			var drop bool
			if out, drop = wire.StripChatUsage(ev, data); drop {
				_ = meter.Observe(string(name), data)
				return
			}
		}
		// The event goes to the client first; metering and text counting
		// (for a cut stream's estimate) are only needed at the end.
		defer func() {
			if data != nil || len(name) > 0 {
				_ = meter.Observe(string(name), data)
			}
			if data != nil && how.text != nil {
				textBytes += how.text(data)
			}
		}()
		if how.x != nil {
			if out = how.translate(name, data, &readErr); len(out) == 0 {
				return
			}
		}
		if writeErr == nil {
			if events == 0 && c.info != nil && !c.info.start.IsZero() {
				c.info.ttfb = rl.now().Sub(c.info.start)
			}
			if _, err := w.Write(out); err != nil {
				writeErr = err
			} else if flusher != nil {
				flusher.Flush()
			}
		}
		events++
	}
	var rest []byte // an unended final event
	for {
		ev, err := rd.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = err
			}
			rest = ev
			break
		}
		emit(ev)
		if writeErr != nil || readErr != nil {
			break
		}
	}
	complete := readErr == nil && writeErr == nil && len(bytes.TrimSpace(rest)) == 0
	if len(bytes.TrimSpace(rest)) > 0 && writeErr == nil {
		// A final event without its blank line: pass it on as it came.
		emit(rest)
	}
	if how.x != nil && writeErr == nil {
		readErr, complete = rl.endTranslated(w, flusher, how.x, readErr, complete)
	}
	return streamResult{textBytes: textBytes, events: events, readErr: readErr, writeErr: writeErr, complete: complete}
}

// translate is an upstream event's translation; a malformed one sets
// *readErr, which ends the stream.
func (how events) translate(name, data []byte, readErr *error) []byte {
	out, err := how.x.Event(string(name), data)
	if err != nil && *readErr == nil {
		*readErr = err
	}
	return out
}

// endTranslated ends a translated stream: the caller's closing events when
// the upstream's ended cleanly, else — it was cut, or ended where it
// cannot (inside a tool call, before its finish), or could not be
// translated — an error event in the caller's shape; such a stream is a
// cut one, charged by the rule for cut streams.
func (rl *relay) endTranslated(w http.ResponseWriter, flusher http.Flusher, x *xlate.Stream, readErr error, complete bool) (error, bool) {
	if readErr == nil {
		tail, err := x.End()
		if len(tail) > 0 {
			_, _ = w.Write(tail)
		}
		if err == nil {
			if flusher != nil {
				flusher.Flush()
			}
			return nil, complete
		}
		readErr = err
	}
	msg := "the provider's stream was cut before its end; retry"
	var bad *xlate.ErrMalformed
	if errors.As(readErr, &bad) {
		msg = "the provider's stream could not be translated: " + bad.Msg
	}
	_, _ = w.Write(x.Fail("upstream_error", msg))
	if flusher != nil {
		flusher.Flush()
	}
	return readErr, false
}
