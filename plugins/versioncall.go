package plugins

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelrelay/modelrelay/internal/clip"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// callResult is a result type the host decodes and checks.
type callResult interface {
	Decode(payload []byte) error
}

// callRequest is a request type the host encodes.
type callRequest interface {
	AppendTo(b []byte) []byte
}

// do runs op on one instance of the pool within CallTimeout. A guest's
// structured error is returned as the *abi.Error it is, and the instance goes
// back to the pool; a settle's is a failure (see run). Any other failure
// discards the instance and is an *Error.
func (v *version) do(ctx context.Context, op abi.Op, opName string, req callRequest, res callResult) error {
	return v.run(ctx, op, opName, req, res, v.get)
}

// doFresh is do on an instance created for this call (fresh) instead of one
// taken from the pool.
func (v *version) doFresh(ctx context.Context, op abi.Op, opName string, req callRequest, res callResult) error {
	return v.run(ctx, op, opName, req, res, v.fresh)
}

// run runs op on the instance take gives it. A guest's structured error on a
// settle is a failure like a trap, wrapped in the *Error, and discards the
// instance: a settle has no refusal the host could act on (the usage has
// happened and must be charged), so an instance that refuses one is taken to
// be in a bad state.
func (v *version) run(ctx context.Context, op abi.Op, opName string, req callRequest, res callResult, take func(context.Context) (*instance, error)) error {
	v.counters.calls.Add(1)
	if err := v.enter(ctx); err != nil {
		return &Error{Plugin: v.name, Op: opName, Err: err}
	}
	defer v.life.RUnlock()
	in, err := take(ctx)
	if err != nil {
		// A failed creation is counted and logged by grow; a caller that
		// gave up waiting is not the plugin's failure.
		return &Error{Plugin: v.name, Op: opName, Err: err}
	}
	// The caller may have given up while the instance was on its way; its
	// deadline is checked against the clock too, since a context's timer
	// can fire late on a busy machine.
	now := time.Now()
	if dl, ok := ctx.Deadline(); ctx.Err() != nil || ok && !now.Before(dl) {
		v.put(in)
		cause := context.Cause(ctx)
		if cause == nil {
			cause = context.DeadlineExceeded
		}
		return &Error{Plugin: v.name, Op: opName, Err: fmt.Errorf("call abandoned by the caller: %w", cause)}
	}
	in.buf = req.AppendTo(in.buf[:0])
	in.guard.arm(now, v.opts.callTimeout)
	view, err := in.invoke(in.ctx, op, in.buf, maxResult)
	if err != nil {
		return v.fail(ctx, in, opName, err)
	}
	payload, gerr, err := abi.DecodeResult(view)
	if err != nil {
		return v.fail(ctx, in, opName, fmt.Errorf("%w: %w", ErrMalformed, err))
	}
	if gerr != nil {
		if op == abi.OpSettle {
			// The guest's words may quote the call's params (the caller's
			// values) and are logged below and by the host's retry: bounded.
			refused := &abi.Error{Code: gerr.Code, Field: clip.Text(gerr.Field, maxGuestText), Message: clip.Text(gerr.Message, maxGuestText)}
			return v.fail(ctx, in, opName, fmt.Errorf("refused to price the usage: %w", refused))
		}
		v.put(in)
		return gerr
	}
	if err := res.Decode(payload); err != nil {
		return v.fail(ctx, in, opName, fmt.Errorf("%w: %w", ErrMalformed, err))
	}
	v.put(in)
	return nil
}

// fail discards in after a failed call and builds the error. A call cut
// short because the caller's own context ended is reported as such and not
// counted as the plugin's failure.
func (v *version) fail(ctx context.Context, in *instance, op string, err error) error {
	memSize := uint64(in.mem.Size())
	tail := in.stderr.last()
	v.replace(in)
	if ctx.Err() != nil && !errors.Is(err, ErrMalformed) {
		return &Error{Plugin: v.name, Op: op, Err: fmt.Errorf("call abandoned by the caller: %w", context.Cause(ctx))}
	}
	full := err
	var refused *abi.Error
	switch {
	case errors.As(err, &refused): // a settle the guest refused (see run)
	case errors.Is(err, ErrMalformed):
	case errors.Is(err, context.DeadlineExceeded):
		err = fmt.Errorf("no answer within %v: %w", v.opts.callTimeout, err)
	case memSize+memoryLimitSlack >= v.opts.memoryLimit:
		err = fmt.Errorf("%w (%d of %d MiB): %w", ErrMemoryLimit, memSize>>20, v.opts.memoryLimit>>20, trap{err})
	default:
		err = trap{err}
	}
	v.counters.failures.Add(1)
	attrs := []any{"plugin", v.name, "op", op, "err", err}
	if detail := full.Error(); strings.Contains(detail, "\n") {
		attrs = append(attrs, "detail", detail) // wazero's wasm stack trace
	}
	if tail != "" {
		attrs = append(attrs, "stderr", tail)
	}
	v.opts.logger.Warn("plugin call failed; instance discarded", attrs...)
	return &Error{Plugin: v.name, Op: op, Err: err}
}

// memoryLimitSlack: a guest whose memory is within this distance of the
// limit when it traps is taken to have run out of memory. The Go runtime
// grows its heap in 4 MiB arenas, so the last failed growth leaves up to
// that much unused.
const memoryLimitSlack = 4<<20 + 64<<10

// warm creates instances until n are live (at most the pool size), so that a
// replacement taking over a busy plugin does not make its first requests wait
// for instantiation. A failure only logs: the version already has one good
// instance, and the pool creates the rest on demand.
func (v *version) warm(ctx context.Context, n int) {
	v.life.RLock()
	defer v.life.RUnlock()
	if v.parked {
		return
	}
	for len(v.slots) < min(n, cap(v.slots)) {
		v.slots <- struct{}{}
		in, err := v.newInstance(ctx)
		if err != nil {
			<-v.slots
			v.opts.logger.Warn("plugin instance could not be pre-created", "plugin", v.name, "err", err)
			return
		}
		v.idle <- in
	}
}

// trap is a guest's failure as wazero reports it, shortened to its first
// line: wazero appends the whole wasm stack trace, which belongs in the log
// (fail logs it) and not in an error message a gateway may show.
type trap struct{ err error }

func (t trap) Error() string {
	msg := t.err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

func (t trap) Unwrap() error { return t.err }

// maxGuestText bounds the text of a guest's error the host logs: a
// plugin's message may quote the caller's values.
const maxGuestText = 512
