package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// # Reload
//
// A poller (Config.Poll) calls Reload, which compares each plugin's
// NAME.wasm and NAME.json by size and modification time and, when those
// differ, by sha256. Added and replaced plugins are loaded in full beside the
// serving ones; then the new Catalog is published with one atomic swap.
// Calls that started on a replaced version finish on it; the version is
// reference-counted and closes its instances once the last call returns. A
// plugin that fails to load, or that conflicts with another, is refused and
// logged with its name, and its previous version keeps serving. Every reload
// that changes something is logged with the names added, replaced and
// removed.

// Bounds on the files read from the plugin directory.
const (
	maxWasmBytes   = 256 << 20
	maxConfigBytes = 16 << 20
)

// fileStat is what a scan compares before reading a file.
type fileStat struct {
	exists bool
	size   int64
	mtime  time.Time
}

func (a fileStat) same(b fileStat) bool {
	return a.exists == b.exists && a.size == b.size && a.mtime.Equal(b.mtime)
}

// fingerprint identifies the files of one plugin: NAME.wasm and NAME.json.
// A scan that finds both stats unchanged skips the plugin without reading
// it; otherwise it reads and hashes them, and only different contents count
// as a replacement (a touched file is not reloaded).
type fingerprint struct {
	wasm, cfg       fileStat
	wasmSum, cfgSum string // hex sha256; cfgSum "" when there is no NAME.json
	refused         bool   // loaded fine but refused for a conflict: retried when another plugin changes
}

// candidate is a plugin found by a scan.
type candidate struct {
	name      string
	path      string // NAME.wasm
	cfgPath   string // NAME.json
	fp        fingerprint
	wasm, cfg []byte // read only when the plugin is to be (re)loaded
}

// scan lists the plugins of the directory (or the one file of LoadFile) and
// stats their files.
func (h *Host) scan() (map[string]*candidate, error) {
	var names []string
	if h.only != "" {
		names = []string{h.only}
	} else {
		entries, err := os.ReadDir(h.dir)
		if err != nil {
			return nil, fmt.Errorf("plugins: plugin directory: %w", err)
		}
		for _, e := range entries {
			if n := e.Name(); strings.HasSuffix(n, ".wasm") && !strings.HasPrefix(n, ".") && len(n) > len(".wasm") {
				names = append(names, n)
			}
		}
	}
	found := make(map[string]*candidate, len(names))
	for _, file := range names {
		name := strings.TrimSuffix(file, ".wasm")
		c := &candidate{
			name:    name,
			path:    filepath.Join(h.dir, file),
			cfgPath: filepath.Join(h.dir, name+".json"),
		}
		var err error
		if c.fp.wasm, err = statFile(c.path); err != nil {
			return nil, fmt.Errorf("plugins: plugin %s: %w", name, err)
		}
		if !c.fp.wasm.exists {
			if h.only != "" {
				return nil, fmt.Errorf("plugins: plugin %s: %s is missing", name, c.path)
			}
			continue // a directory or a file gone between ReadDir and Stat
		}
		if c.fp.cfg, err = statFile(c.cfgPath); err != nil {
			return nil, fmt.Errorf("plugins: plugin %s: %w", name, err)
		}
		found[name] = c
	}
	return found, nil
}

// statFile stats a regular file (following symbolic links); a missing file,
// or something that is not a regular file, does not exist.
func statFile(path string) (fileStat, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fileStat{}, nil
	case err != nil:
		return fileStat{}, err
	case !st.Mode().IsRegular():
		return fileStat{}, nil
	}
	return fileStat{exists: true, size: st.Size(), mtime: st.ModTime()}, nil
}

// read reads and hashes the candidate's files.
func (c *candidate) read() error {
	var err error
	if c.wasm, err = readFile(c.path, maxWasmBytes); err != nil {
		return err
	}
	c.fp.wasmSum = sha256Hex(c.wasm)
	c.cfg, c.fp.cfgSum = nil, ""
	if c.fp.cfg.exists {
		if c.cfg, err = readFile(c.cfgPath, maxConfigBytes); err != nil {
			return err
		}
		c.fp.cfgSum = sha256Hex(c.cfg)
	}
	return nil
}

func readFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d MiB", path, limit>>20)
	}
	return b, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// counter returns the counters of a plugin name, creating them. h.mu held.
func (h *Host) counter(name string) *counters {
	c := h.counters[name]
	if c == nil {
		c = new(counters)
		h.counters[name] = c
	}
	return c
}

// loadMany loads the candidates concurrently (compilation is the slow part
// and uses one core per module) and returns the versions and errors by name.
func (h *Host) loadMany(ctx context.Context, cands []*candidate) (map[string]*version, map[string]error) {
	loaded := make(map[string]*version)
	failed := make(map[string]error)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, c := range cands {
		ctr := h.counter(c.name)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var v *version
			var err error
			if c.wasm == nil { // Reload has read (and hashed) what it found changed
				err = c.read()
			}
			if err != nil {
				err = &Error{Plugin: c.name, Op: "load", Err: err}
			} else {
				v, err = loadVersion(ctx, h.opts, c.name, c.path, c.wasm, c.cfg, ctr)
			}
			c.wasm, c.cfg = nil, nil
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[c.name] = err
				return
			}
			loaded[c.name] = v
		})
	}
	wg.Wait()
	return loaded, failed
}

// loadAll is the first load: every plugin must load, and the catalogue must
// be consistent.
func (h *Host) loadAll(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	found, err := h.scan()
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return fmt.Errorf("plugins: no plugins (*.wasm) in %s", h.dir)
	}
	cands := slices.Collect(maps.Values(found))
	loaded, failed := h.loadMany(ctx, cands)
	closeAll := func() {
		for _, v := range loaded {
			v.retire()
		}
	}
	if len(failed) > 0 {
		closeAll()
		var errs []error
		for _, name := range slices.Sorted(maps.Keys(failed)) {
			errs = append(errs, failed[name])
		}
		return errors.Join(errs...)
	}
	cat, err := buildCatalog(loaded)
	if err != nil {
		closeAll()
		return err
	}
	for name, c := range found {
		fp := c.fp
		h.seen[name] = &fp
	}
	h.cat.Store(cat)
	for _, info := range cat.infos {
		h.logger.Info("plugin loaded", "plugin", info.Name, "file", info.File, "sha256", info.SHA256,
			"implements", info.Implements, "models", len(info.Models), "engine", h.opts.engine.kind)
	}
	h.pruneMetered(cat)
	return nil
}

// pruneMetered removes the metered copies that no version of cat uses and
// that have gone unused for long (engine.pruneMetered). h.mu held.
func (h *Host) pruneMetered(cat *Catalog) {
	inUse := make(map[string]bool, len(cat.versions))
	for _, v := range cat.versions {
		inUse[v.meteredCopy()] = true
	}
	if n := h.opts.engine.pruneMetered(inUse, time.Now()); n > 0 {
		h.logger.Info("plugins: removed metered modules no plugin has used for a day", "removed", n)
	}
}

// Reload rescans the directory now: it loads added plugins, reloads replaced
// ones (a different NAME.wasm or NAME.json), and drops removed ones. The new
// catalogue is built completely and then swapped in; calls in flight finish
// on the versions they started on, which are closed once drained. A plugin
// that fails to load, or that would serve a model another plugin serves,
// is refused and its previous version (if any) keeps serving; the failure is
// logged naming the plugin and returned. The poller calls Reload every
// Config.Poll.
func (h *Host) Reload(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed.Load() {
		return &Error{Op: "reload", Err: ErrClosed}
	}
	found, err := h.rescan()
	if err != nil {
		return err
	}
	cur := h.cat.Load()
	changed, removed := h.changes(found, cur)
	if len(changed) == 0 && len(removed) == 0 {
		return nil
	}
	changed = h.withRefused(found, changed)
	slices.SortFunc(changed, func(a, b *candidate) int { return strings.Compare(a.name, b.name) })
	slices.Sort(removed)

	loaded, failed := h.loadMany(ctx, changed)
	for _, v := range loaded {
		if old := cur.versions[v.name]; old != nil {
			v.warm(ctx, len(old.slots))
		}
	}
	// The next catalogue: the unchanged versions first, then the previous
	// versions of plugins whose new version failed, then the new versions;
	// a new version that conflicts is refused and its predecessor kept.
	a := &assembly{h: h, cur: cur, next: newCatalog()}
	a.keepUnchanged(changed, removed)
	a.keepFailed(changed, failed)
	errs := a.addLoaded(changed, loaded, failed)
	a.next.finish()
	h.cat.Store(a.next)
	for _, v := range a.stale {
		v.retire()
	}
	if len(a.added)+len(a.replaced)+len(removed) > 0 {
		h.logger.Info("plugins reloaded", "added", a.added, "replaced", a.replaced, "removed", removed)
	}
	h.pruneMetered(a.next)
	return errors.Join(errs...)
}

// rescan scans the directory, logging a failure once until it changes
// (the poller would repeat it every interval). h.mu held.
func (h *Host) rescan() (map[string]*candidate, error) {
	found, err := h.scan()
	if err != nil {
		if msg := err.Error(); msg != h.lastScanErr {
			h.lastScanErr = msg
			h.logger.Error("plugin directory scan failed; plugins keep serving", "dir", h.dir, "err", err)
		}
		return nil, err
	}
	h.lastScanErr = ""
	return found, nil
}

// changes compares what the scan found with what was last seen: the
// plugins whose files changed (read, ready to load) and the names of the
// loaded plugins whose files are gone. A file only touched (same checksum)
// is not a change. h.mu held.
func (h *Host) changes(found map[string]*candidate, cur *Catalog) (changed []*candidate, removed []string) {
	for name, c := range found {
		prev := h.seen[name]
		if prev != nil && prev.wasm.same(c.fp.wasm) && prev.cfg.same(c.fp.cfg) {
			continue
		}
		if err := c.read(); err != nil {
			// Probably a file being replaced; the next scan sees it again.
			h.logger.Warn("plugin file unreadable; previous version keeps serving", "plugin", name, "err", err)
			continue
		}
		if prev != nil && prev.wasmSum == c.fp.wasmSum && prev.cfgSum == c.fp.cfgSum {
			prev.wasm, prev.cfg = c.fp.wasm, c.fp.cfg // touched, not changed
			continue
		}
		changed = append(changed, c)
	}
	for name := range cur.versions {
		if found[name] == nil {
			removed = append(removed, name)
		}
	}
	for name := range h.seen {
		if found[name] == nil {
			delete(h.seen, name)
		}
	}
	return changed, removed
}

// withRefused adds to changed the plugins refused for a conflict: they get
// another chance now that something else changed. h.mu held.
func (h *Host) withRefused(found map[string]*candidate, changed []*candidate) []*candidate {
	for name, fp := range h.seen {
		if fp.refused && !slices.ContainsFunc(changed, func(c *candidate) bool { return c.name == name }) {
			c := found[name]
			if err := c.read(); err == nil {
				changed = append(changed, c)
			}
		}
	}
	return changed
}

// assembly is the next catalogue of a Reload while it is put together.
type assembly struct {
	h     *Host
	cur   *Catalog   // the catalogue serving now
	next  *Catalog   // the one being assembled
	stale []*version // versions to retire once next is published

	added, replaced []string // plugin names, for the log
}

// keep adds v to the next catalogue, or retires it when it conflicts with
// a newly loaded plugin.
func (a *assembly) keep(v *version) {
	if err := a.next.add(v); err != nil {
		a.h.logger.Error("plugin dropped: it conflicts with a newly loaded plugin", "plugin", v.name, "err", err)
		a.stale = append(a.stale, v)
	}
}

// keepUnchanged keeps the current versions whose plugins neither changed
// nor went away, and retires those that went away.
func (a *assembly) keepUnchanged(changed []*candidate, removed []string) {
	for _, name := range slices.Sorted(maps.Keys(a.cur.versions)) {
		v := a.cur.versions[name]
		switch {
		case slices.Contains(removed, name):
			a.stale = append(a.stale, v)
		case !slices.ContainsFunc(changed, func(c *candidate) bool { return c.name == name }):
			a.keep(v)
		}
	}
}

// keepFailed keeps the previous version of each plugin whose new version
// failed to load; the failed files are not retried until they change again.
func (a *assembly) keepFailed(changed []*candidate, failed map[string]error) {
	for _, c := range changed {
		err := failed[c.name]
		if err == nil {
			continue
		}
		fp := c.fp
		a.h.seen[c.name] = &fp
		if old := a.cur.versions[c.name]; old != nil {
			a.h.logger.Error("plugin reload failed; previous version keeps serving", "plugin", c.name, "err", err)
			a.keep(old)
		} else {
			a.h.logger.Error("plugin load failed; not added", "plugin", c.name, "err", err)
		}
	}
}

// addLoaded adds the newly loaded versions, retiring the versions they
// replace; a version that conflicts with the catalogue is refused (its
// predecessor kept) and marked so that withRefused retries it. It returns
// the failures and refusals.
func (a *assembly) addLoaded(changed []*candidate, loaded map[string]*version, failed map[string]error) []error {
	var errs []error
	for _, c := range changed {
		v := loaded[c.name]
		if v == nil {
			errs = append(errs, failed[c.name])
			continue
		}
		fp := c.fp
		a.h.seen[c.name] = &fp
		old := a.cur.versions[c.name]
		if err := a.next.add(v); err != nil {
			fp.refused = true
			errs = append(errs, err)
			a.stale = append(a.stale, v)
			if old != nil {
				a.h.logger.Error("plugin reload refused; previous version keeps serving", "plugin", c.name, "err", err)
				a.keep(old)
			} else {
				a.h.logger.Error("plugin refused; not added", "plugin", c.name, "err", err)
			}
			continue
		}
		if old != nil {
			a.replaced = append(a.replaced, c.name)
			a.stale = append(a.stale, old)
		} else {
			a.added = append(a.added, c.name)
		}
	}
	return errs
}

// poll calls Reload. Reload logs what it does and what fails; its error
// needs no second report here.
func (h *Host) poll(time.Time) { _ = h.Reload(context.Background()) }

// every runs fn every interval until the Host closes, then closes done.
func (h *Host) every(interval time.Duration, done chan struct{}, fn func(now time.Time)) {
	defer close(done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case now := <-t.C:
			fn(now)
		}
	}
}
