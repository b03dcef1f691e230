package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

// # Lifecycle
//
// Open scans Config.Dir. For every NAME.wasm it reads the file (and NAME.json
// beside it, the plugin's configuration), compiles it once per file version
// (wazero's file-backed compilation cache makes a restart cheap), checks the
// exports of the ABI (sdk/abi: mr_abi_version, mr_alloc, mr_call, memory)
// and their types, and creates the first instance: instantiation runs the
// reactor's _initialize, then the host checks the ABI version (refusing, for
// example, "plugin bad: … ABI version 7, host speaks 2"), hands the instance
// NAME.json with OpConfigure, and asks it to describe itself with OpDescribe.
// The description is validated with pricing's rules and indexed: model →
// plugin. Two plugins claiming one model, or two implementing select, is an
// error naming both. At Open every failure is fatal; the error names the
// plugin.
//
// Admit and Settle go to the plugin serving the request's model; Select goes
// to the one plugin implementing select, and its plans are cached per
// version of that plugin, keyed by model, route and the lines with their
// breaker states.

// Config configures a Host. Its zero value, with Dir set, works.
type Config struct {
	// Dir is the plugin directory: every NAME.wasm in it is a plugin, and an
	// optional NAME.json beside it is that plugin's configuration (handed to
	// it verbatim by OpConfigure). Files whose names start with "." are
	// ignored, so that a copy in progress can be renamed into place.
	Dir string
	// CacheDir is the directory of wazero's file-backed compilation cache,
	// which turns a restart's compile of a 3 MB plugin from about a second
	// into tens of milliseconds. Its subdirectory metered keeps every module
	// as the meter rewrote it, named by its checksum, so that a parked
	// plugin's next call compiles that copy instead of metering the file
	// again; a copy no loaded version uses is removed a day after its last
	// load (at Open, or a Reload that changes something). "" means neither
	// (modules are still compiled only once per file version within a
	// process).
	CacheDir string
	// PoolSize is the most instances of one plugin alive at once. 0 means 2
	// (measured: more instances per plugin add memory, not throughput, on a
	// 2-core machine).
	PoolSize int
	// CallTimeout is the deadline of one call into a plugin. 0 means 250ms.
	// Instantiating an instance (the guest's Go runtime start) and
	// configuring it have their own budget of 5s.
	CallTimeout time.Duration
	// MemoryLimitPages is the most 64 KiB pages of memory one instance may
	// have. 0 means 1024 (64 MiB). A Go guest needs well over 4 MiB to start.
	MemoryLimitPages uint32
	// RecycleCalls: an instance is replaced after this many calls. 0 means
	// 1000000. A replacement costs a Go guest's start (tens of milliseconds
	// of CPU), so at thousands of calls a second a low value shows as
	// periodic latency spikes; the memory mark (RecycleBytes) is what bounds
	// a guest that grows.
	RecycleCalls int
	// RecycleBytes: an instance is replaced once its memory exceeds this many
	// bytes (guest memory never shrinks). 0 means 32 MiB.
	RecycleBytes uint64
	// IdleRelease: a plugin that has had no call for this long is parked:
	// its instances and compiled code are released (about 26 MB of resident
	// memory for a Go plugin) and its next call loads it again (about 0.15 s
	// with the compilation cache). 0 means 1m; a negative value never parks.
	IdleRelease time.Duration
	// Poll is the interval at which Dir is rescanned for added, replaced and
	// removed plugins. 0 means 1s; a negative value turns watching off
	// (Reload still works).
	Poll time.Duration
	// Logger receives load, reload and failure records. nil means
	// slog.Default().
	Logger *slog.Logger
}

// Defaults of Config's zero fields, and of Settings' (relay serve's).
// DefaultCallTimeout is far above a call's microseconds because a loaded
// machine can deschedule a call for tens of milliseconds, and a timeout
// fails the request.
const (
	DefaultPoolSize         = 2
	DefaultCallTimeout      = 250 * time.Millisecond
	DefaultMemoryLimitPages = 1024
	DefaultRecycleCalls     = 1_000_000
	DefaultRecycleBytes     = 32 << 20
	DefaultPoll             = time.Second
	DefaultIdleRelease      = time.Minute
)

// maxMemoryLimitPages is the most pages a 32-bit wasm memory can have (4 GiB).
const maxMemoryLimitPages = 65536

// withDefaults fills the zero fields of cfg and refuses negative ones.
func (cfg Config) withDefaults() (Config, error) {
	switch {
	case cfg.PoolSize < 0:
		return cfg, fmt.Errorf("plugins: Config.PoolSize %d is negative", cfg.PoolSize)
	case cfg.CallTimeout < 0:
		return cfg, fmt.Errorf("plugins: Config.CallTimeout %v is negative", cfg.CallTimeout)
	case cfg.RecycleCalls < 0:
		return cfg, fmt.Errorf("plugins: Config.RecycleCalls %d is negative", cfg.RecycleCalls)
	case cfg.MemoryLimitPages > maxMemoryLimitPages:
		return cfg, fmt.Errorf("plugins: Config.MemoryLimitPages %d is above %d (4 GiB)", cfg.MemoryLimitPages, maxMemoryLimitPages)
	}
	if cfg.PoolSize == 0 {
		cfg.PoolSize = DefaultPoolSize
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.MemoryLimitPages == 0 {
		cfg.MemoryLimitPages = DefaultMemoryLimitPages
	}
	if cfg.RecycleCalls == 0 {
		cfg.RecycleCalls = DefaultRecycleCalls
	}
	if cfg.RecycleBytes == 0 {
		cfg.RecycleBytes = DefaultRecycleBytes
	}
	if cfg.Poll == 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.IdleRelease == 0 {
		cfg.IdleRelease = DefaultIdleRelease
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}

// Host loads the plugins of a directory into one wazero runtime and runs
// calls on pooled instances. It is safe for concurrent use.
type Host struct {
	opts   *options
	logger *slog.Logger
	dir    string
	only   string // LoadFile: the one .wasm file name served; "" for the whole directory

	cat    atomic.Pointer[Catalog]
	closed atomic.Bool

	mu          sync.Mutex              // serialises Reload and Close; guards the fields below
	seen        map[string]*fingerprint // by plugin name: the files last loaded (or refused)
	counters    map[string]*counters
	lastScanErr string

	stop        chan struct{}
	pollerDone  chan struct{}
	janitorDone chan struct{} // nil when nothing is ever parked
}

// PoolStats are one plugin's pool figures, for metrics. Calls, Failures and
// Recycled count since the Host opened, across reloads.
type PoolStats struct {
	Plugin    string
	Instances int    // live instances (idle, busy or being created)
	Idle      int    // instances waiting for a call
	Calls     uint64 // calls made (admit, settle, select; plan cache hits excluded)
	Failures  uint64 // calls and instantiations that failed by the plugin's fault
	Recycled  uint64 // instances replaced after RecycleCalls or RecycleBytes
	Parked    bool   // released for want of calls (see Config.IdleRelease)
	Parks     uint64 // times it was parked
	Unparks   uint64 // times a call loaded it again
}

// Open loads every plugin of cfg.Dir and starts watching the directory.
// A missing or empty directory is an error, and so is any plugin that fails
// to load (the error, an *Error, names it), two plugins serving one model,
// and two plugins implementing select.
func Open(ctx context.Context, cfg Config) (*Host, error) {
	if cfg.Dir == "" {
		return nil, errors.New("plugins: Config.Dir is empty")
	}
	st, err := os.Stat(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("plugins: plugin directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("plugins: plugin directory %q is not a directory", cfg.Dir)
	}
	return open(ctx, cfg, cfg.Dir, "")
}

// LoadFile loads the single plugin at path (with the NAME.json beside it, if
// any) as a Host; cfg.Dir is ignored. With cfg.Poll ≥ 0 the file is watched
// for replacement like a directory would be.
func LoadFile(ctx context.Context, path string, cfg Config) (*Host, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	if !st.Mode().IsRegular() || filepath.Ext(path) != ".wasm" {
		return nil, fmt.Errorf("plugins: %q is not a .wasm file", path)
	}
	return open(ctx, cfg, filepath.Dir(path), filepath.Base(path))
}

func open(ctx context.Context, cfg Config, dir, only string) (*Host, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	eng, err := newEngine(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	h := &Host{
		opts: &options{
			engine:       eng,
			logger:       cfg.Logger,
			poolSize:     cfg.PoolSize,
			callTimeout:  cfg.CallTimeout,
			recycleCalls: cfg.RecycleCalls,
			recycleBytes: cfg.RecycleBytes,
			memoryLimit:  uint64(cfg.MemoryLimitPages) << 16,
			idleRelease:  cfg.IdleRelease,
		},
		logger:   cfg.Logger,
		dir:      dir,
		only:     only,
		seen:     make(map[string]*fingerprint),
		counters: make(map[string]*counters),
		stop:     make(chan struct{}),
	}
	h.opts.reload = h.Reload
	if err := h.loadAll(ctx); err != nil {
		eng.close(context.Background())
		return nil, err
	}
	if cfg.Poll > 0 {
		h.pollerDone = make(chan struct{})
		go h.every(cfg.Poll, h.pollerDone, h.poll)
	}
	if cfg.IdleRelease > 0 {
		h.janitorDone = make(chan struct{})
		go h.every(janitorInterval(cfg.IdleRelease), h.janitorDone, h.parkIdle)
	}
	return h, nil
}

// Catalog returns the current snapshot of plugins and models.
func (h *Host) Catalog() *Catalog { return h.cat.Load() }

// Stats returns the pool figures of every loaded plugin, sorted by name.
func (h *Host) Stats() []PoolStats {
	c := h.cat.Load()
	out := make([]PoolStats, 0, len(c.infos))
	for _, info := range c.infos {
		v := c.versions[info.Name]
		out = append(out, PoolStats{
			Plugin:    v.name,
			Instances: len(v.slots),
			Idle:      len(v.idle),
			Calls:     v.counters.calls.Load(),
			Failures:  v.counters.failures.Load(),
			Recycled:  v.counters.recycled.Load(),
			Parked:    v.isParked(),
			Parks:     v.counters.parked.Load(),
			Unparks:   v.counters.unparked.Load(),
		})
	}
	return out
}

// Close stops watching, lets the calls in flight finish (until ctx ends) and
// releases every instance and the runtime. Calls after Close fail with an
// *Error wrapping ErrClosed.
func (h *Host) Close(ctx context.Context) error {
	if !h.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(h.stop)
	if h.pollerDone != nil {
		<-h.pollerDone
	}
	if h.janitorDone != nil {
		<-h.janitorDone
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.cat.Swap(emptyCatalog())
	for _, v := range old.versions {
		v.retire()
	}
	var err error
	for _, v := range old.versions {
		select {
		case <-v.done:
		case <-ctx.Done():
			err = fmt.Errorf("plugins: closing with calls in flight: %w", context.Cause(ctx))
		}
		if err != nil {
			break
		}
	}
	h.opts.engine.close(context.Background())
	return err
}

func emptyCatalog() *Catalog {
	c, _ := buildCatalog(map[string]*version{})
	return c
}

// serving returns the version serving model, holding a reference the caller
// releases.
func (h *Host) serving(model, op string) (*version, error) {
	for {
		if h.closed.Load() {
			return nil, &Error{Op: op, Err: ErrClosed}
		}
		v := h.cat.Load().byModel[model]
		if v == nil {
			return nil, &Error{Op: op, Err: fmt.Errorf("model %q: %w", model, ErrNoPlugin)}
		}
		if v.acquire() {
			return v, nil
		}
		// v was retired after we read the catalogue; the next read sees its
		// successor.
	}
}

// selecting returns the version implementing select, holding a reference.
func (h *Host) selecting() (*version, error) {
	for {
		if h.closed.Load() {
			return nil, &Error{Op: "select", Err: ErrClosed}
		}
		v := h.cat.Load().selector
		if v == nil {
			return nil, &Error{Op: "select", Err: fmt.Errorf("line selection: %w", ErrNoPlugin)}
		}
		if v.acquire() {
			return v, nil
		}
	}
}

// Admit asks the plugin serving req.Model to validate the call and quote the
// most it can cost. A guest's refusal is returned as the *abi.Error it sent;
// a failure is an *Error.
func (h *Host) Admit(ctx context.Context, req abi.AdmitRequest) (abi.AdmitResult, error) {
	var out admitOut
	err := h.call(func() (*version, error) { return h.serving(req.Model, "admit") }, func(v *version) error {
		return v.do(ctx, abi.OpAdmit, "admit", &req, &out)
	})
	if err != nil {
		return abi.AdmitResult{}, err
	}
	return out.r, nil
}

// Settle asks the plugin serving req.Model for the exact charge of the real
// usage. A settle that fails — a trap, a timeout, a malformed or negative
// answer, or the guest's own error — discards the instance it ran on and is
// tried once more on an instance created for the retry, not taken from the
// pool, whose other instances may share the state that made the first one
// fail. The error, when the retry fails too, is the retry's, an *Error (the
// guest's own error wrapped in it). No retry is made when ctx has ended, the
// Host is closed or no plugin serves the model.
func (h *Host) Settle(ctx context.Context, req abi.SettleRequest) (abi.SettleResult, error) {
	var out settleOut
	get := func() (*version, error) { return h.serving(req.Model, "settle") }
	err := h.call(get, func(v *version) error {
		return v.do(ctx, abi.OpSettle, "settle", &req, &out)
	})
	if err != nil && retrySettle(ctx, err) {
		h.logger.Warn("plugin settle failed; retrying once on a fresh instance",
			"plugin", h.Catalog().PluginFor(req.Model), "model", req.Model, "err", err)
		err = h.call(get, func(v *version) error {
			return v.doFresh(ctx, abi.OpSettle, "settle", &req, &out)
		})
	}
	if err != nil {
		return abi.SettleResult{}, err
	}
	return out.r, nil
}

// retrySettle reports whether a failed settle is worth a retry: the plugin
// failed, not the caller (gone) or the host (closed, no plugin).
func retrySettle(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNoPlugin)
}

// Select asks the line-selection plugin for a plan. Plans are cached per
// version of that plugin, keyed by model, route and the lines with their
// breaker states (not req.Now); a cached plan is returned without a call.
// The returned plan is the caller's to reorder.
func (h *Host) Select(ctx context.Context, req abi.SelectRequest) (abi.SelectResult, error) {
	kb := keyBuf.Get().(*[]byte)
	key := planKey((*kb)[:0], &req)
	defer func() { *kb = key; keyBuf.Put(kb) }()
	var res abi.SelectResult
	err := h.call(h.selecting, func(v *version) error {
		if plan, ok := v.plans.get(key); ok {
			res = abi.SelectResult{Plan: plan}
			return nil
		}
		out := selectOut{req: &req}
		if err := v.do(ctx, abi.OpSelect, "select", &req, &out); err != nil {
			return err
		}
		v.plans.put(key, out.r.Plan)
		res = out.r
		return nil
	})
	return res, err
}

// call runs fn on the version get returns, holding a reference. When that
// version was parked and its file had changed on disk, unparking it
// reloaded the directory, and fn runs once more on the version that now
// serves: a replaced file never fails a call.
func (h *Host) call(get func() (*version, error), fn func(*version) error) error {
	for attempt := 0; ; attempt++ {
		v, err := get()
		if err != nil {
			return err
		}
		err = fn(v)
		v.release()
		if attempt == 0 && errors.Is(err, errFileChanged) {
			continue
		}
		return err
	}
}

// admitOut decodes and checks an AdmitResult.
type admitOut struct{ r abi.AdmitResult }

func (o *admitOut) Decode(b []byte) error {
	if err := o.r.Decode(b); err != nil {
		return err
	}
	if o.r.Hold < 0 {
		return fmt.Errorf("negative hold %d", o.r.Hold)
	}
	for i, p := range o.r.Set {
		if p.Name == "" {
			return fmt.Errorf("set[%d]: empty field name", i)
		}
	}
	return nil
}

// settleOut decodes and checks a SettleResult.
type settleOut struct{ r abi.SettleResult }

func (o *settleOut) Decode(b []byte) error {
	if err := o.r.Decode(b); err != nil {
		return err
	}
	if o.r.Charge < 0 {
		return fmt.Errorf("negative charge %d", o.r.Charge)
	}
	return nil
}

// selectOut decodes a SelectResult and checks the plan against the request.
type selectOut struct {
	req *abi.SelectRequest
	r   abi.SelectResult
}

func (o *selectOut) Decode(b []byte) error {
	if err := o.r.Decode(b); err != nil {
		return err
	}
	return checkPlan(o.req, o.r.Plan)
}
