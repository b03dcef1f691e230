package plugins

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/modelrelay/modelrelay/internal/wasmmeter"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// instantiateBudget bounds instantiation (the guest's _initialize, which
// starts the Go runtime), the ABI version check and OpConfigure, and, at
// load, OpDescribe. It is far above the measured 12–15 ms so that a loaded
// machine does not refuse a good plugin, and far below anything a caller
// would notice as a hang.
const instantiateBudget = 5 * time.Second

// counters survive reloads: they are per plugin name, not per version, so
// that the metrics built from them only ever grow.
type counters struct {
	calls    atomic.Uint64
	failures atomic.Uint64
	recycled atomic.Uint64
	parked   atomic.Uint64
	unparked atomic.Uint64
}

// version is one loaded version of one plugin: its compiled module, what it
// described, and its pool of instances.
//
// Lifetime: refs starts at 1, the reference of the catalogue that serves the
// version. Every call (and every background refill) holds one more for its
// duration. retire drops the catalogue's reference once a newer catalogue no
// longer holds the version; when the count reaches zero nothing can use the
// version any more, and it closes its instances and compiled module.
type version struct {
	name string
	path string // the .wasm file
	sum  string // hex sha256 of the .wasm bytes
	// meteredSum is the hex sha256 of the module as metered and compiled:
	// unpark compiles it again from the engine's copy (engine.recompile).
	// Written only under life held exclusively (unpark); read it elsewhere
	// with meteredCopy.
	meteredSum string
	cfgSum     string // hex sha256 of NAME.json; "" when absent
	config     []byte // NAME.json, handed to OpConfigure of every instance
	loaded     time.Time
	desc       abi.Description
	models     []pricing.Model
	counters   *counters
	opts       *options
	compiled   wazero.CompiledModule

	slots chan struct{}  // one token per live instance (idle, busy or being created)
	idle  chan *instance // instances ready for a call
	plans *planCache     // Select results, when the plugin implements select
	refs  atomic.Int64   // see the type comment
	gone  atomic.Bool    // retired: no background refills any more
	done  chan struct{}  // closed once the version has shut down

	// life is held shared by every call for its whole length, and
	// exclusively to park or unpark the version (see park.go); parked, set
	// under it, means compiled is closed and no instance is alive.
	life    sync.RWMutex
	parked  bool
	lastUse atomic.Int64 // unix nanoseconds at the start of the last call
}

// options are the settings every version shares with its Host.
type options struct {
	engine       *engine
	logger       *slog.Logger
	poolSize     int
	callTimeout  time.Duration
	recycleCalls int
	recycleBytes uint64
	memoryLimit  uint64        // bytes
	idleRelease  time.Duration // park a version idle this long; ≤ 0 never
	// reload rescans the directory (Host.Reload): unpark calls it when a
	// parked version's file has changed.
	reload func(context.Context) error
}

// requiredExports are the functions a guest must export, with their types.
var requiredExports = []struct {
	name    string
	params  []api.ValueType
	results []api.ValueType
}{
	{abi.ExportVersion, nil, []api.ValueType{api.ValueTypeI32}},
	{abi.ExportAlloc, []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}},
	{abi.ExportCall, []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}},
}

// meteredCopy is meteredSum, read under life.
func (v *version) meteredCopy() string {
	v.life.RLock()
	defer v.life.RUnlock()
	return v.meteredSum
}

// loadVersion compiles wasm, checks its exports, creates the first instance
// (which checks the ABI version and configures it), asks it to describe
// itself and validates the description. The first instance is kept in the
// pool: a plugin that cannot serve fails here, at load, and not on a
// request. Every error is an *Error naming the plugin.
func loadVersion(ctx context.Context, o *options, name, path string, wasm, config []byte, c *counters) (*version, error) {
	v := &version{
		name:     name,
		path:     path,
		sum:      sha256Hex(wasm),
		config:   config,
		loaded:   time.Now(),
		counters: c,
		opts:     o,
		slots:    make(chan struct{}, o.poolSize),
		idle:     make(chan *instance, o.poolSize),
		done:     make(chan struct{}),
	}
	if config != nil {
		v.cfgSum = sha256Hex(config)
	}
	v.refs.Store(1)

	compiled, metered, err := o.engine.compile(ctx, wasm)
	if err != nil {
		return nil, &Error{Plugin: name, Op: "compile", Err: err}
	}
	v.compiled = compiled
	if err := checkExports(wasm); err != nil {
		_ = compiled.Close(context.Background())
		return nil, &Error{Plugin: name, Op: "load", Err: err}
	}

	v.slots <- struct{}{}
	in, err := v.newInstance(ctx)
	if err != nil {
		_ = compiled.Close(context.Background())
		return nil, &Error{Plugin: name, Op: "instantiate", Err: err}
	}
	if err := v.describe(ctx, in); err != nil {
		in.close()
		_ = compiled.Close(context.Background())
		return nil, &Error{Plugin: name, Op: "describe", Err: err}
	}
	v.idle <- in
	v.lastUse.Store(time.Now().UnixNano())
	v.meteredSum = o.engine.keepMetered(metered) // a plugin refused above leaves no copy
	return v, nil
}

// checkExports refuses a module that lacks an export of the ABI or exports
// it with another type, and a Go module built as a command instead of a
// reactor (its exports would trap on first use). It reads the exports from
// the binary (wasmmeter.ReadExports) rather than asking wazero, which would
// build and keep a definition of every function of the module, a few hundred
// KB that every garbage collection would scan for as long as it is loaded.
func checkExports(wasm []byte) error {
	ex, err := wasmmeter.ReadExports(wasm)
	if err != nil {
		return err
	}
	fns := ex.Funcs
	for _, want := range requiredExports {
		def, ok := fns[want.name]
		if !ok {
			if _, isCommand := fns["_start"]; isCommand {
				return fmt.Errorf("%w: no export %s; the module is a command (it exports _start): build it with -buildmode=c-shared", ErrABI, want.name)
			}
			return fmt.Errorf("%w: no export %s", ErrABI, want.name)
		}
		if !slices.Equal(def.Params, want.params) || !slices.Equal(def.Results, want.results) {
			return fmt.Errorf("%w: export %s has type %s, want %s", ErrABI, want.name,
				signature(def.Params, def.Results), signature(want.params, want.results))
		}
	}
	if _, ok := fns["_start"]; ok {
		if _, ok := fns["_initialize"]; !ok {
			return fmt.Errorf("%w: the module is a command (it exports _start, not _initialize): build it with -buildmode=c-shared", ErrABI)
		}
	}
	if !slices.Contains(ex.Memories, "memory") {
		return fmt.Errorf("%w: no exported memory named \"memory\"", ErrABI)
	}
	return nil
}

func signature(params, results []api.ValueType) string {
	s := "func("
	for i, t := range params {
		if i > 0 {
			s += ", "
		}
		s += api.ValueTypeName(t)
	}
	s += ")"
	switch len(results) {
	case 0:
	case 1:
		s += " " + api.ValueTypeName(results[0])
	default:
		s += " ("
		for i, t := range results {
			if i > 0 {
				s += ", "
			}
			s += api.ValueTypeName(t)
		}
		s += ")"
	}
	return s
}

// newInstance instantiates the module (running _initialize), checks the ABI
// version and configures the instance with NAME.json, within
// instantiateBudget. The caller holds a slot for it.
func (v *version) newInstance(ctx context.Context) (*instance, error) {
	// The guard alone bounds it: tick ends the guest once the budget has
	// passed, and guarded keeps ctx's own cancellation.
	g := &guard{}
	g.arm(time.Now(), instantiateBudget)
	ctx = guarded(ctx, g)
	stderr := newStderrLog(v.opts.logger, v.name)
	mod, err := v.opts.engine.rt.InstantiateModule(ctx, v.compiled, moduleConfig(stderr))
	if err != nil {
		return nil, withStderr(err, stderr)
	}
	in := &instance{
		mod:    mod,
		alloc:  mod.ExportedFunction(abi.ExportAlloc),
		call:   mod.ExportedFunction(abi.ExportCall),
		mem:    mod.ExportedMemory("memory"),
		stderr: stderr,
		guard:  g,
		ctx:    guarded(context.Background(), g),
	}
	if in.alloc == nil || in.call == nil || in.mem == nil {
		in.close()
		return nil, fmt.Errorf("%w: exports missing after instantiation", ErrABI)
	}
	if err := mod.ExportedFunction(abi.ExportVersion).CallWithStack(ctx, in.stack[:1]); err != nil {
		in.close()
		return nil, fmt.Errorf("%s: %w", abi.ExportVersion, withStderr(err, stderr))
	}
	if got := uint32(in.stack[0]); got != abi.Version {
		in.close()
		return nil, fmt.Errorf("%w: ABI version %d, host speaks %d", ErrABI, got, abi.Version)
	}
	view, err := in.invoke(ctx, abi.OpConfigure, v.config, maxResult)
	if err == nil {
		var gerr *abi.Error
		var payload []byte
		payload, gerr, err = abi.DecodeResult(view)
		switch {
		case err != nil:
			err = fmt.Errorf("%w: %w", ErrMalformed, err)
		case gerr != nil:
			err = fmt.Errorf("configuration refused: %w", gerr)
		case len(payload) != 0:
			err = fmt.Errorf("%w: configure returned %d unexpected bytes", ErrMalformed, len(payload))
		}
	}
	if err != nil {
		in.close()
		return nil, fmt.Errorf("configure: %w", withStderr(err, stderr))
	}
	return in, nil
}

// withStderr appends the end of the guest's standard error, if any, to a
// failure at load time (where it is the only clue an operator gets).
func withStderr(err error, stderr *stderrLog) error {
	if tail := stderr.last(); tail != "" {
		return fmt.Errorf("%w (guest stderr: %q)", err, tail)
	}
	return err
}

// describe runs OpDescribe on in and validates the description.
func (v *version) describe(ctx context.Context, in *instance) error {
	in.guard.arm(time.Now(), instantiateBudget)
	view, err := in.invoke(guarded(ctx, in.guard), abi.OpDescribe, nil, maxDescribeResult)
	if err != nil {
		return withStderr(err, in.stderr)
	}
	payload, gerr, err := abi.DecodeResult(view)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	case gerr != nil:
		return fmt.Errorf("refused to describe itself: %w", gerr)
	}
	if err := v.desc.Decode(payload); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	models, err := validateDescription(&v.desc)
	if err != nil {
		return fmt.Errorf("%w: description: %w", ErrMalformed, err)
	}
	v.models = models
	if v.implements(abi.CapSelect) {
		v.plans = newPlanCache()
	}
	return nil
}

func (v *version) implements(capability string) bool {
	for _, c := range v.desc.Implements {
		if c == capability {
			return true
		}
	}
	return false
}

// acquire takes a reference for one call; it fails once the version has
// shut down (the caller then reads the newer catalogue).
func (v *version) acquire() bool {
	for {
		n := v.refs.Load()
		if n <= 0 {
			return false
		}
		if v.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference; the last one shuts the version down.
func (v *version) release() {
	if v.refs.Add(-1) == 0 {
		v.shutdown()
	}
}

// retire drops the catalogue's reference: the version finishes the calls it
// has and then shuts down. Call it once, after the catalogue that no longer
// holds the version has been published.
func (v *version) retire() {
	v.gone.Store(true)
	v.release()
}

// shutdown closes the instances and the compiled module. Nothing holds a
// reference any more, so every live instance is idle.
func (v *version) shutdown() {
	v.life.Lock() // a park in progress finishes first
	for drained := false; !drained; {
		select {
		case in := <-v.idle:
			in.close()
			<-v.slots
		default:
			drained = true
		}
	}
	if v.compiled != nil {
		_ = v.compiled.Close(context.Background())
		v.compiled = nil
	}
	v.parked = true
	v.life.Unlock()
	close(v.done)
}

// get takes an idle instance, or, while the pool has room, starts creating
// one and waits for whichever comes first: an instance another call returns
// or the new one. It waits on ctx; an instance still being created when the
// caller gives up goes to the pool.
func (v *version) get(ctx context.Context) (*instance, error) {
	select {
	case in := <-v.idle:
		return in, nil
	default:
	}
	var errc chan error // the creation this call started, if any
	select {
	case in := <-v.idle:
		return in, nil
	case v.slots <- struct{}{}:
		if !v.acquire() { // cannot happen while the caller holds a reference
			<-v.slots
			return nil, ErrClosed
		}
		errc = make(chan error, 1)
		go v.grow(errc)
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	select {
	case in := <-v.idle:
		return in, nil
	case err := <-errc:
		return nil, fmt.Errorf("new instance: %w", err)
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// grow creates an instance into the pool, with its own budget and not the
// context of the call that needed it. The caller has taken a slot for it and
// a reference on v; grow gives back the slot if creation fails, and the
// reference when done. A failure is counted and logged here, and sent on
// errc when it is not nil.
func (v *version) grow(errc chan<- error) {
	defer v.release()
	// The reference it holds keeps the version from being parked (park
	// waits for a count of one), so compiled stays open meanwhile.
	in, err := v.newInstance(context.Background())
	if err != nil {
		<-v.slots
		v.counters.failures.Add(1)
		v.opts.logger.Warn("plugin instance could not be created", "plugin", v.name, "err", err)
		if errc != nil {
			errc <- err
		}
		return
	}
	v.idle <- in // never blocks: live instances ≤ cap(idle)
}

// fresh creates an instance for one call instead of taking one from the
// pool, so that the call cannot meet a state the pool's instances share
// (what a retry after a failure wants). It takes a free slot or, when none
// is free, an idle instance's, closing that instance; else it waits for
// either. A creation that fails gives the slot back and, unless the caller
// gave up, is counted and logged as grow does.
func (v *version) fresh(ctx context.Context) (*instance, error) {
	select {
	case v.slots <- struct{}{}:
	default:
		select {
		case v.slots <- struct{}{}:
		case in := <-v.idle:
			in.close() // its slot is this call's now
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	in, err := v.newInstance(ctx)
	if err != nil {
		<-v.slots
		if ctx.Err() == nil {
			v.counters.failures.Add(1)
			v.opts.logger.Warn("plugin instance could not be created", "plugin", v.name, "err", err)
		}
		return nil, fmt.Errorf("new instance: %w", err)
	}
	return in, nil
}

// put returns a healthy instance to the pool, or recycles it when it has
// served RecycleCalls calls or its memory has grown past RecycleBytes (guest
// memory never shrinks).
func (v *version) put(in *instance) {
	in.calls++
	if in.calls >= v.opts.recycleCalls || uint64(in.mem.Size()) > v.opts.recycleBytes {
		v.counters.recycled.Add(1)
		v.replace(in)
		return
	}
	v.idle <- in // never blocks: live instances ≤ cap(idle)
}

// replace closes in and creates its replacement in the background, keeping
// its slot, so that no request pays for instantiation. A retired version is
// not refilled.
func (v *version) replace(in *instance) {
	in.close()
	if v.gone.Load() || !v.acquire() {
		<-v.slots
		return
	}
	go v.grow(nil)
}
