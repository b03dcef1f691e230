package sdktest

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/fixture"
	"github.com/modelrelay/modelrelay/sdk/internal/guest"
)

var update = flag.Bool("sdktest.update", false, "rewrite the expectations of plugin fixtures with what the plugin answers")

// Updating reports whether fixtures are being rewritten: the
// -sdktest.update flag, or RELAY_UPDATE=1.
func Updating() bool { return *update || os.Getenv("RELAY_UPDATE") == "1" }

// Run runs every fixture in dir against the registered plugin, one subtest
// per file, after Setup. In update mode it rewrites each fixture with what
// the plugin answered instead of failing, except a fixture whose result is
// not Rewritable (settle failed), which fails as usual.
func Run(t *testing.T, dir string) {
	t.Helper()
	Setup(t)
	fixtures, err := fixture.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := Caller()
	for i := range fixtures {
		f := &fixtures[i]
		name := strings.TrimSuffix(filepath.Base(f.Path), ".json")
		t.Run(name, func(t *testing.T) {
			r := f.Check(c)
			if Updating() && r.Rewritable() {
				f.Update(r)
				if err := f.Save(); err != nil {
					t.Fatal(err)
				}
				if !r.OK() {
					t.Logf("updated %s:\n%v", f.Path, r.Err())
				}
				return
			}
			if !r.OK() {
				t.Errorf("%s (%s):\n%v", f.Path, f.Name, r.Err())
			}
		})
	}
}

// Setup configures the registered plugin with NAME.json from the working
// directory (empty when there is none), describes it, and returns the
// Description. It fails the test when there is no plugin, or when configure
// or describe fails.
func Setup(t testing.TB) abi.Description {
	t.Helper()
	p, ok := guest.Registered()
	if !ok {
		// Call reports why: nothing registered, or a bad registration.
		_, gerr, _ := abi.DecodeResult(guest.Call(abi.OpDescribe, nil))
		t.Fatalf("sdktest: no plugin: %v", gerr)
	}
	config, err := os.ReadFile(p.Name + ".json")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("sdktest: %v", err)
	}
	if err := Configure(config); err != nil {
		t.Fatalf("sdktest: configure %s with %s.json: %v", p.Name, p.Name, err)
	}
	d, err := Describe()
	if err != nil {
		t.Fatalf("sdktest: describe %s: %v", p.Name, err)
	}
	return d
}

// Configure runs OpConfigure with config through the sdk's dispatch.
func Configure(config []byte) error {
	_, err := call(abi.OpConfigure, config)
	return err
}

// Describe runs OpDescribe through the sdk's dispatch.
func Describe() (abi.Description, error) {
	var d abi.Description
	payload, err := call(abi.OpDescribe, nil)
	if err != nil {
		return d, err
	}
	if err := d.Decode(payload); err != nil {
		return d, err
	}
	return d, nil
}

// Caller returns a fixture.Caller that runs the registered plugin through
// the sdk's dispatch: requests are encoded, dispatched and decoded exactly
// as in the wasm build. A plugin's error is returned as an *abi.Error.
func Caller() fixture.Caller { return nativeCaller{} }

type nativeCaller struct{}

func (nativeCaller) Admit(r abi.AdmitRequest) (abi.AdmitResult, error) {
	var res abi.AdmitResult
	return res, callInto(abi.OpAdmit, r.AppendTo(nil), &res)
}

func (nativeCaller) Settle(r abi.SettleRequest) (abi.SettleResult, error) {
	var res abi.SettleResult
	return res, callInto(abi.OpSettle, r.AppendTo(nil), &res)
}

func (nativeCaller) Select(r abi.SelectRequest) (abi.SelectResult, error) {
	var res abi.SelectResult
	return res, callInto(abi.OpSelect, r.AppendTo(nil), &res)
}

type decoder interface{ Decode([]byte) error }

func callInto(op abi.Op, input []byte, res decoder) error {
	payload, err := call(op, input)
	if err != nil {
		return err
	}
	return res.Decode(payload)
}

// call runs op and splits the envelope: a plugin error is an *abi.Error, a
// malformed envelope a plain error.
func call(op abi.Op, input []byte) ([]byte, error) {
	payload, gerr, derr := abi.DecodeResult(guest.Call(op, input))
	switch {
	case derr != nil:
		return nil, fmt.Errorf("malformed result envelope: %w", derr)
	case gerr != nil:
		return nil, gerr
	}
	return payload, nil
}
