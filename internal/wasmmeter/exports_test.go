package wasmmeter

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tetratelabs/wazero"
)

// sameExports fails t unless ReadExports tells of wasm what wazero does.
func sameExports(t *testing.T, rt wazero.Runtime, wasm []byte) {
	t.Helper()
	ctx := context.Background()
	m, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatalf("wazero refuses the module: %v", err)
	}
	defer m.Close(ctx)
	ex, err := ReadExports(wasm)
	if err != nil {
		t.Fatal(err)
	}
	want := m.ExportedFunctions()
	if len(ex.Funcs) != len(want) {
		t.Errorf("%d exported functions, wazero says %d", len(ex.Funcs), len(want))
	}
	for name, def := range want {
		got, ok := ex.Funcs[name]
		if !ok {
			t.Errorf("export %q missing", name)
			continue
		}
		if !bytes.Equal(got.Params, def.ParamTypes()) || !bytes.Equal(got.Results, def.ResultTypes()) {
			t.Errorf("export %q: params %x results %x, wazero says %x %x", name, got.Params, got.Results, def.ParamTypes(), def.ResultTypes())
		}
	}
	var mems []string
	for name := range m.ExportedMemories() {
		mems = append(mems, name)
	}
	slices.Sort(mems)
	got := slices.Sorted(slices.Values(ex.Memories))
	if !slices.Equal(got, mems) {
		t.Errorf("exported memories %q, wazero says %q", got, mems)
	}
}

// TestReadExports: the exports of hand-made modules (an imported function
// exported under two names, a global export, a memory) and of the
// project's built plugins are what wazero reads.
func TestReadExports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	i32, i64 := []byte{typeI32}, []byte{0x7e}
	reexport := wasmModule(
		sec(secType, vec(funcType(i32, i64), funcType(cat(i32, i32), nil))),
		sec(secImport, vec(importFunc("env", "f", 1))),
		sec(secFunction, vec(u32(0))),
		sec(secMemory, vec([]byte{0x00, 0x01})),
		sec(secGlobal, vec(cat([]byte{typeI32, 0x00}, i32c(7), op(opEnd)))),
		sec(secExport, vec(exportFunc("imported", 0), exportFunc("again", 0), exportFunc("own", 1),
			cat(name("mem"), []byte{0x02}, u32(0)), cat(name("g"), []byte{0x03}, u32(0)))),
		sec(secCode, vec(body(noLocals, op(0x42, 0x00, opEnd)))))
	for name, wasm := range map[string][]byte{"arith": arithModule(), "renumber": renumberModule(), "reexport": reexport, "empty": []byte(header)} {
		t.Run(name, func(t *testing.T) { sameExports(t, rt, wasm) })
	}
	ex, err := ReadExports(reexport)
	if err != nil {
		t.Fatal(err)
	}
	if f := ex.Funcs["imported"]; !bytes.Equal(f.Params, cat(i32, i32)) || len(f.Results) != 0 {
		t.Errorf("imported function's type %+v, want (i32, i32) -> ()", f)
	}
	if f := ex.Funcs["own"]; !bytes.Equal(f.Params, i32) || !bytes.Equal(f.Results, i64) {
		t.Errorf("defined function's type %+v, want (i32) -> i64", f)
	}
	for _, f := range builtPlugins(t) {
		wasm, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(f), func(t *testing.T) { sameExports(t, rt, wasm) })
	}
}

// TestReadExportsRefuses: an export naming a function the module does not
// have is an error, not a panic or a guess.
func TestReadExportsRefuses(t *testing.T) {
	t.Parallel()
	i32 := []byte{typeI32}
	for name, wasm := range map[string][]byte{
		"function index": wasmModule(
			sec(secType, vec(funcType(i32, i32))),
			sec(secFunction, vec(u32(0))),
			sec(secExport, vec(exportFunc("f", 1))),
			sec(secCode, vec(body(noLocals, localGet(0), op(opEnd))))),
		"truncated export": wasmModule(
			sec(secType, vec(funcType(i32, i32))),
			sec(secFunction, vec(u32(0))),
			sec(secExport, cat(u32(1), name("f"), []byte{0x00})),
			sec(secCode, vec(body(noLocals, localGet(0), op(opEnd))))),
		"not wasm": []byte("\x00asm\x02\x00\x00\x00"),
	} {
		t.Run(name, func(t *testing.T) {
			if ex, err := ReadExports(wasm); err == nil {
				t.Fatalf("accepted: %+v", ex)
			}
		})
	}
}

// FuzzReadExports: ReadExports never panics, and of a module wazero accepts
// it reads what wazero reads. As in FuzzInstrument, only modules the meter's
// parser accepts reach wazero, whose decoder allocates declared lengths.
func FuzzReadExports(f *testing.F) {
	ctx := context.Background()
	rt := fuzzSetup(f)
	f.Fuzz(func(t *testing.T, wasm []byte) {
		if _, err := ReadExports(wasm); err != nil {
			return
		}
		if _, _, err := Instrument(wasm, 0); err != nil {
			return
		}
		m, err := rt.CompileModule(ctx, wasm)
		if err != nil {
			return
		}
		m.Close(ctx)
		sameExports(t, rt, wasm)
	})
}
