package plugins

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// # Parking
//
// A version with no call for Config.IdleRelease (default 1m) is parked: its
// instances and compiled module are closed, keeping only what the catalogue
// needs, and its next call compiles it again from the compilation cache and
// the metered copy kept beside it, and starts an instance (about 145 ms:
// BenchmarkUnpark). See park.go for the locking that keeps a
// running call or an instance being created from losing its module.

// Parking: a plugin that serves no calls for Config.IdleRelease gives back
// its memory, and its next call loads it again.
//
// A Go plugin costs about 26 MB of resident memory while loaded: about 14 MB
// of native code compiled by wazero (outside the Go heap), about 7 MB of the
// decoded module wazero keeps to instantiate it, and 4 MB or more of memory
// per instance. A gateway whose traffic is all chat keeps its image, video
// and typed-question plugins loaded for nothing. So the Host parks a version
// idle that long: it closes its instances and its compiled module and keeps
// only what the catalogue needs (the description, the prices, the file's
// path and checksum). The next call that needs the version unparks it:
// checks that the file has not changed, compiles the module again and
// creates an instance. With the cache directory set, the module compiled is
// the metered copy kept there at load (checked against the checksum held in
// memory), and the compile is a read of wazero's compilation cache. That is
// about 145 ms on the development machine (BenchmarkUnpark, median; 175 ms
// when it metered the file again), most of it wazero's decoding, validation
// and cache read, paid by that one call and by any call that arrives while
// it runs.
//
// Synchronisation: every call holds version.life shared from before it takes
// an instance until after it gives it back; park and unpark hold it
// exclusively. Background instance creation (grow) holds a reference on the
// version instead, and park leaves alone a version with any reference
// besides the catalogue's, so compiled is never closed under a creation.

// errFileChanged is what unparking a version whose file has changed on disk
// since it was loaded returns: the version cannot be rebuilt from it. The
// call reloads the directory at once and the Host retries it on the version
// that now serves (see Host.call).
var errFileChanged = errors.New("the plugin file changed since it was loaded")

// enter takes v.life shared for a call, unparking v first if it is parked.
func (v *version) enter(ctx context.Context) error {
	v.lastUse.Store(time.Now().UnixNano())
	for {
		v.life.RLock()
		if !v.parked {
			return nil
		}
		v.life.RUnlock()
		if err := v.unpark(ctx); err != nil {
			if errors.Is(err, errFileChanged) && v.opts.reload != nil {
				// Load the new file now rather than at the next scan; the
				// caller retries on the catalogue that serves it.
				_ = v.opts.reload(context.WithoutCancel(ctx))
			}
			return err
		}
	}
}

// unpark compiles v's file again. The first call's instance is created by
// the pool as usual.
func (v *version) unpark(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	v.life.Lock()
	defer v.life.Unlock()
	if !v.parked {
		return nil // another call unparked it
	}
	if v.refs.Load() <= 0 {
		return ErrClosed
	}
	t0 := time.Now()
	wasm, err := readFile(v.path, maxWasmBytes)
	if err != nil {
		return fmt.Errorf("unpark: %w", err)
	}
	if sha256Hex(wasm) != v.sum {
		return fmt.Errorf("unpark: %w", errFileChanged)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), instantiateBudget)
	defer cancel()
	// The module as it was metered at load, when the engine kept it; else
	// the source metered again (the same bytes: the meter is deterministic).
	compiled, ok, err := v.opts.engine.recompile(cctx, v.meteredSum)
	if !ok {
		var metered []byte
		if compiled, metered, err = v.opts.engine.compile(cctx, wasm); err == nil {
			if sum := v.opts.engine.keepMetered(metered); sum != v.meteredSum {
				// The meter is deterministic; if it ever is not, say so and
				// keep the copy that was compiled.
				v.opts.logger.Warn("plugin metered differently than at load", "plugin", v.name, "was", v.meteredSum, "now", sum)
				v.meteredSum = sum
			}
		}
	}
	if err != nil {
		v.counters.failures.Add(1)
		return fmt.Errorf("unpark: compile: %w", err)
	}
	from := "the metered copy"
	if !ok {
		from = "the file, metered again"
	}
	v.compiled, v.parked = compiled, false
	v.counters.unparked.Add(1)
	v.opts.logger.Info("plugin loaded again after being parked", "plugin", v.name, "from", from, "took", time.Since(t0).Round(time.Millisecond).String())
	return nil
}

// park releases v's instances and compiled module when v has had no call
// for idle, no call is running and nothing else holds it. It reports
// whether it parked v.
func (v *version) park(idle time.Duration, now time.Time) bool {
	if now.Sub(time.Unix(0, v.lastUse.Load())) < idle {
		return false
	}
	// Our own reference keeps the version from shutting down under us; the
	// catalogue it came from may already have retired it (parkIdle walks a
	// snapshot), in which case it is left to shut down.
	if !v.acquire() {
		return false
	}
	defer v.release()      // after the unlock below: a shutdown it triggers takes life
	if !v.life.TryLock() { // a call is running
		return false
	}
	defer v.life.Unlock()
	// Only the catalogue's reference besides ours: no instance is being
	// created, and no call holds an instance (calls hold life, which we
	// have).
	if v.parked || v.gone.Load() || v.refs.Load() != 2 || now.Sub(time.Unix(0, v.lastUse.Load())) < idle {
		return false
	}
	for drained := false; !drained; {
		select {
		case in := <-v.idle: // every live instance is idle: see above
			in.close()
			<-v.slots
		default:
			drained = true
		}
	}
	_ = v.compiled.Close(context.Background())
	v.compiled, v.parked = nil, true
	v.counters.parked.Add(1)
	v.opts.logger.Info("plugin parked: no call for a while; the next call loads it again", "plugin", v.name, "idle", idle.String())
	return true
}

// isParked reports whether v is parked.
func (v *version) isParked() bool {
	v.life.RLock()
	defer v.life.RUnlock()
	return v.parked
}

// parkIdle parks every version of the current catalogue idle longer than
// the Host's IdleRelease.
func (h *Host) parkIdle(now time.Time) {
	for _, v := range h.cat.Load().versions {
		v.park(h.opts.idleRelease, now)
	}
}

// janitorInterval is how often versions are checked for idleness: a tenth
// of the idle time, between 10 ms and 10 s.
func janitorInterval(idle time.Duration) time.Duration {
	return min(max(idle/10, 10*time.Millisecond), 10*time.Second)
}
