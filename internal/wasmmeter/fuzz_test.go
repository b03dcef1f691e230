package wasmmeter

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
)

// FuzzInstrument: Instrument never panics, and a module it accepts is
// metered into a module wazero (with its default features, as the plugin
// host runs it) accepts whenever wazero accepts the original. A metered
// module wazero refuses would be a rewrite that broke the code.
//
// Only modules Instrument accepts are handed to wazero: its decoder
// allocates whatever lengths a module declares, and the fuzzer finds a
// 27 GB type section in a second (TestHugeDeclarations). That the process
// survives compiling what Instrument accepts is part of what this checks.
func FuzzInstrument(f *testing.F) {
	ctx := context.Background()
	rt := fuzzSetup(f)
	f.Fuzz(func(t *testing.T, wasm []byte) {
		metered, _, err := Instrument(wasm, 0)
		if err != nil {
			return
		}
		m, err := rt.CompileModule(ctx, metered)
		if err == nil {
			m.Close(ctx)
			return
		}
		if orig, origErr := rt.CompileModule(ctx, wasm); origErr == nil {
			orig.Close(ctx)
			t.Fatalf("wazero accepts the module, but not its metered copy: %v", err)
		}
	})
}

// fuzzSetup adds the seed modules and returns an interpreter runtime, closed
// when the fuzz test ends.
func fuzzSetup(f *testing.F) wazero.Runtime {
	f.Add(arithModule())
	f.Add(renumberModule())
	f.Add([]byte(header))
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	f.Cleanup(func() { rt.Close(ctx) })
	return rt
}
