package plugins

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/fixture"
)

// CacheEnv names the environment variable TestFixtures reads the compilation
// cache directory from (the tests of this package use it too). Unset means
// no file cache.
const CacheEnv = "RELAY_WASM_CACHE"

// TestFixtures runs `relay plugin test PLUGIN.wasm DIR [-update]`: it loads the
// plugin at wasmPath (with the NAME.json beside it, if any) in the same
// sandbox the gateway uses, runs every fixture in dir (sdk/fixture) against
// it, and writes one line per fixture to w — "ok   NAME" or
// "FAIL NAME: what differs" — and then the summary "N passed, M failed".
// NAME is the fixture's file name without .json.
//
// With update, each fixture's expectations are first rewritten with what the
// plugin answered (sdk/fixture's Update and Save), and then checked again. A
// fixture on which the plugin failed (a trap, a timeout, a malformed answer:
// anything but the plugin's own structured error), or whose settle returned
// an error, is not rewritten: its expectations cannot express that.
//
// err reports what kept the run from happening at all: the plugin failed to
// load, the fixtures could not be read, or w failed.
func TestFixtures(ctx context.Context, wasmPath, dir string, update bool, w io.Writer) (passed, failed int, err error) {
	fixtures, err := fixture.Load(dir)
	if err != nil {
		return 0, 0, err
	}
	h, err := LoadFile(ctx, wasmPath, Config{
		CacheDir: os.Getenv(CacheEnv),
		Poll:     -1,
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return 0, 0, err
	}
	defer h.Close(context.Background())

	for i := range fixtures {
		f := &fixtures[i]
		name := strings.TrimSuffix(filepath.Base(f.Path), ".json")
		res, call := runFixture(ctx, h, f)
		if update && call.rewritable() {
			f.Update(res)
			if err := f.Save(); err != nil {
				return passed, failed, err
			}
			res, call = runFixture(ctx, h, f)
		}
		line := "ok   " + name + "\n"
		if failures := call.failures(res); len(failures) > 0 {
			line = "FAIL " + name + ": " + strings.Join(failures, "; ") + "\n"
			failed++
		} else {
			passed++
		}
		if _, err := io.WriteString(w, line); err != nil {
			return passed, failed, err
		}
	}
	if _, err := fmt.Fprintf(w, "%d passed, %d failed\n", passed, failed); err != nil {
		return passed, failed, err
	}
	return passed, failed, nil
}

func runFixture(ctx context.Context, h *Host, f *fixture.Fixture) (fixture.Result, *fixtureCaller) {
	c := &fixtureCaller{ctx: ctx, h: h}
	return f.Check(c), c
}

// fixtureCaller is the loaded plugin as a fixture.Caller. It remembers the
// failures the fixture format cannot express, so that -update leaves such a
// fixture alone.
type fixtureCaller struct {
	ctx       context.Context
	h         *Host
	hostErr   error // a plugin failure (*Error), not the plugin's own error
	settleErr error // any settle error
}

func (c *fixtureCaller) note(err error) {
	var ae *abi.Error
	if err != nil && !errors.As(err, &ae) && c.hostErr == nil {
		c.hostErr = err
	}
}

func (c *fixtureCaller) Admit(req abi.AdmitRequest) (abi.AdmitResult, error) {
	r, err := c.h.Admit(c.ctx, req)
	c.note(err)
	return r, err
}

func (c *fixtureCaller) Settle(req abi.SettleRequest) (abi.SettleResult, error) {
	r, err := c.h.Settle(c.ctx, req)
	c.note(err)
	if err != nil && c.settleErr == nil {
		c.settleErr = err
	}
	return r, err
}

func (c *fixtureCaller) Select(req abi.SelectRequest) (abi.SelectResult, error) {
	r, err := c.h.Select(c.ctx, req)
	c.note(err)
	return r, err
}

func (c *fixtureCaller) rewritable() bool { return c.hostErr == nil && c.settleErr == nil }

// failures returns the fixture's failures; sdk/fixture already reports a
// plugin failure, this only makes sure one is never missed.
func (c *fixtureCaller) failures(r fixture.Result) []string {
	if c.hostErr != nil && r.OK() {
		return []string{c.hostErr.Error()}
	}
	return r.Failures
}

var _ fixture.Caller = (*fixtureCaller)(nil)
