package plugins

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/modelrelay/modelrelay/internal/wasmmeter"
)

// meterFuel is the fuel a metered guest spends between two calls of the
// meter's host function (wasmmeter.Instrument): a few tens of microseconds
// of a tight loop, at most about a millisecond of the costliest code.
const meterFuel = wasmmeter.DefaultFuel

// guard is the deadline of whatever an instance is running: a call
// (CallTimeout), or its instantiation and configuration
// (instantiateBudget). The instance's calls carry it in their context, and
// tick, the meter's host function, ends the call once the deadline has
// passed. Arming it is one atomic store: no context, timer or goroutine per
// call.
type guard struct {
	deadline atomic.Int64 // monotonic nanoseconds (mono)
}

type guardKey struct{}

// clockBase anchors mono: time.Since reads the monotonic clock.
var clockBase = time.Now()

// mono is t on the monotonic clock, in nanoseconds since clockBase.
func mono(t time.Time) int64 { return int64(t.Sub(clockBase)) }

// arm sets the deadline to d after now.
func (g *guard) arm(now time.Time, d time.Duration) { g.deadline.Store(mono(now) + int64(d)) }

// guarded returns ctx carrying g, for calls into an instance.
func guarded(ctx context.Context, g *guard) context.Context {
	return context.WithValue(ctx, guardKey{}, g)
}

// instantiateMeter registers tick as the host function metered modules
// import.
func instantiateMeter(ctx context.Context, rt wazero.Runtime) error {
	_, err := rt.NewHostModuleBuilder(wasmmeter.ImportModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(tick), nil, nil).Export(wasmmeter.ImportName).
		Instantiate(ctx)
	return err
}

// tick is called by a metered guest each time it has spent its fuel. It ends
// the call, by a panic wazero returns from the call as a *sys.ExitError,
// when the call's context has ended or its guard's deadline has passed; a
// deadline makes errors.Is(err, context.DeadlineExceeded) hold. A call
// without a guard is ended too: every call the host makes carries one, so
// that would be a bug, and failing closed keeps it from being a guest that
// cannot be stopped.
func tick(ctx context.Context, _ api.Module, _ []uint64) {
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.Canceled) {
			panic(sys.NewExitError(sys.ExitCodeContextCanceled))
		}
		panic(sys.NewExitError(sys.ExitCodeDeadlineExceeded))
	}
	g, _ := ctx.Value(guardKey{}).(*guard)
	if g == nil || mono(time.Now()) >= g.deadline.Load() {
		panic(sys.NewExitError(sys.ExitCodeDeadlineExceeded))
	}
}
