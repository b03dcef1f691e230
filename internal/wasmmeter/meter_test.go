package wasmmeter

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// ticker is the host side of the meter in these tests: it counts ticks and,
// with stopAfter > 0, ends the call at that tick.
type ticker struct {
	ticks     atomic.Int64
	stopAfter int64
}

const stopCode = 99

// newRuntime returns a wazero runtime (the compiler, as in production) with
// the meter's host function and env.add1 (x+1), closed with the test.
func newRuntime(t testing.TB, tk *ticker) wazero.Runtime {
	return newRuntimeConfig(t, tk, wazero.NewRuntimeConfig())
}

func newRuntimeConfig(t testing.TB, tk *ticker, rc wazero.RuntimeConfig) wazero.Runtime {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	t.Cleanup(func() { rt.Close(ctx) })
	_, err := rt.NewHostModuleBuilder(ImportModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {
			if n := tk.ticks.Add(1); tk.stopAfter > 0 && n >= tk.stopAfter {
				panic(sys.NewExitError(stopCode))
			}
		}), nil, nil).Export(ImportName).Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, s []uint64) { s[0]++ }),
			[]api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}).Export("add1").
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func instantiate(t testing.TB, rt wazero.Runtime, wasm []byte) api.Module {
	t.Helper()
	ctx := context.Background()
	m, err := rt.InstantiateModule(ctx, mustCompile(t, rt, wasm), wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustCompile(t testing.TB, rt wazero.Runtime, wasm []byte) wazero.CompiledModule {
	t.Helper()
	c, err := rt.CompileModule(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func instrument(t testing.TB, wasm []byte, fuel uint32) ([]byte, Stats) {
	t.Helper()
	out, st, err := Instrument(wasm, fuel)
	if err != nil {
		t.Fatal(err)
	}
	return out, st
}

func call1(t testing.TB, m api.Module, fn string, arg uint64) uint64 {
	t.Helper()
	res, err := m.ExportedFunction(fn).Call(context.Background(), arg)
	if err != nil {
		t.Fatalf("%s(%d): %v", fn, arg, err)
	}
	return res[0]
}

// arith: sum(n) = 1+…+n by a loop, fact(n) by recursion, fill(n) fills n
// bytes with 7, copies them after themselves and reads the last one back.
func arithModule() []byte {
	i32 := []byte{typeI32}
	sum := body(locals(1, typeI32),
		op(opBlock, blockEmpty, opLoop, blockEmpty),
		localGet(0), op(i32Eqz), brIf(1),
		localGet(1), localGet(0), op(i32Add), localSet(1),
		localGet(0), i32c(1), op(i32Sub), localSet(0),
		br(0),
		op(opEnd, opEnd),
		localGet(1), op(opEnd))
	fact := body(noLocals,
		localGet(0), op(i32Eqz), op(opIf, typeI32),
		i32c(1),
		op(opElse), localGet(0), localGet(0), i32c(1), op(i32Sub), call(1), op(i32Mul),
		op(opEnd, opEnd))
	fill := body(noLocals,
		i32c(0), i32c(7), localGet(0), fc(11, 0x00), // memory.fill
		localGet(0), i32c(0), localGet(0), fc(10, 0x00, 0x00), // memory.copy
		localGet(0), localGet(0), op(i32Add), i32c(1), op(i32Sub),
		op(0x2d, 0x00, 0x00), // i32.load8_u
		op(opEnd))
	return wasmModule(
		sec(secType, vec(funcType(i32, i32))),
		sec(secFunction, vec(u32(0), u32(0), u32(0))),
		sec(secMemory, vec([]byte{0x00, 0x02})),
		sec(secExport, vec(exportFunc("sum", 0), exportFunc("fact", 1), exportFunc("fill", 2))),
		sec(secCode, vec(sum, fact, fill)),
	)
}

// TestSameResults runs the same calls on a module and its metered copy.
func TestSameResults(t *testing.T) {
	t.Parallel()
	wasm := arithModule()
	metered, st := instrument(t, wasm, 100)
	if st != (Stats{Functions: 3, Loops: 1, Bulk: 2}) {
		t.Errorf("stats = %+v", st)
	}
	tk := &ticker{}
	rt := newRuntime(t, tk)
	plain, met := instantiate(t, rt, wasm), instantiate(t, rt, metered)
	for _, c := range []struct {
		fn  string
		arg uint64
	}{{"sum", 0}, {"sum", 10}, {"sum", 100000}, {"fact", 0}, {"fact", 10}, {"fill", 1}, {"fill", 30000}} {
		if got, want := call1(t, met, c.fn, c.arg), call1(t, plain, c.fn, c.arg); got != want {
			t.Errorf("%s(%d) = %d metered, %d plain", c.fn, c.arg, got, want)
		}
	}
	// sum(100000) alone passes 100,001 loop headers: with 100 units between
	// ticks, about a thousand ticks.
	if n := tk.ticks.Load(); n < 900 {
		t.Errorf("%d ticks, want about a thousand or more", n)
	}
}

// TestRenumbered checks every place a function index lives: calls, exports,
// the start function, element segments (indices and ref.func expressions),
// global initialisers and the name section.
func TestRenumbered(t *testing.T) {
	t.Parallel()
	wasm := renumberModule()
	metered, st := instrument(t, wasm, 0)
	if st.Functions != 5 {
		t.Errorf("stats = %+v", st)
	}
	rt := newRuntime(t, &ticker{})
	for _, w := range [][]byte{wasm, metered} {
		m := instantiate(t, rt, w)
		for _, c := range []struct {
			fn       string
			arg, out uint64
		}{{"double", 21, 42}, {"viaTable", 0, 21}, {"viaTable", 1, 40}, {"viaTable", 2, 40}, {"getG", 1, 7}} {
			if got := call1(t, m, c.fn, c.arg); got != c.out {
				t.Errorf("%s(%d) = %d, want %d", c.fn, c.arg, got, c.out)
			}
		}
		_, err := m.ExportedFunction("boom").Call(context.Background(), 0)
		if err == nil || !strings.Contains(err.Error(), "boom") {
			t.Errorf("boom: %v, want a trap whose stack trace names boom", err)
		}
		if g := m.ExportedGlobal("ref"); g == nil {
			t.Errorf("global export lost")
		}
	}
}

func renumberModule() []byte {
	i32 := []byte{typeI32}
	double := body(noLocals, localGet(0), localGet(0), op(i32Add, opEnd))
	viaTable := body(noLocals, i32c(20), localGet(0), op(opCallIndirect), u32(0), u32(0), op(opEnd))
	start := body(noLocals, i32c(5), op(opGlobalSet), u32(0), op(opEnd))
	getG := body(noLocals, op(opGlobalGet), u32(0), localGet(0), op(i32Add), call(0), op(opEnd))
	boom := body(noLocals, op(opUnreachable, opEnd))
	names := cat(name("name"), []byte{1}, func() []byte {
		m := vec(
			cat(u32(0), name("add1")), cat(u32(1), name("double")), cat(u32(2), name("viaTable")),
			cat(u32(3), name("start")), cat(u32(4), name("getG")), cat(u32(5), name("boom")))
		return cat(u32(uint32(len(m))), m)
	}())
	return wasmModule(
		sec(secType, vec(funcType(i32, i32), funcType(nil, nil))),
		sec(secImport, vec(importFunc("env", "add1", 0))),
		sec(secFunction, vec(u32(0), u32(0), u32(1), u32(0), u32(0))),
		sec(secTable, vec([]byte{0x70, 0x00, 0x03})),
		sec(secGlobal, vec(
			cat([]byte{typeI32, 0x01}, i32c(0), op(opEnd)),
			cat([]byte{0x70, 0x00, opRefFunc}, u32(5), op(opEnd)))),
		sec(secExport, vec(exportFunc("double", 1), exportFunc("viaTable", 2), exportFunc("getG", 4),
			exportFunc("boom", 5), cat(name("ref"), []byte{0x03}, u32(1)))),
		sec(secStart, u32(3)),
		sec(secElement, vec(
			cat(u32(0), i32c(0), op(opEnd), vec(u32(0), u32(1))),
			cat(u32(4), i32c(2), op(opEnd), vec(cat([]byte{opRefFunc}, u32(1), op(opEnd)))))),
		sec(secCode, vec(double, viaTable, start, getG, boom)),
		sec(secCustom, names),
	)
}

// TestTerminates runs guests that never return without the meter — a loop,
// a binary recursion with no loop at all (2⁶⁰ calls), a loop of bulk fills —
// and checks that each one calls the host function, which ends it.
func TestTerminates(t *testing.T) {
	t.Parallel()
	void := funcType(nil, nil)
	loop := body(noLocals, op(opLoop, blockEmpty), br(0), op(opEnd, opEnd))
	recurse := body(noLocals,
		localGet(0), op(opIf, blockEmpty),
		localGet(0), i32c(1), op(i32Sub), call(1),
		localGet(0), i32c(1), op(i32Sub), call(1),
		op(opEnd, opEnd))
	fill := body(noLocals, op(opLoop, blockEmpty), i32c(0), i32c(0), i32c(65536), fc(11, 0x00), br(0), op(opEnd, opEnd))
	wasm := wasmModule(
		sec(secType, vec(void, funcType([]byte{typeI32}, nil))),
		sec(secFunction, vec(u32(0), u32(1), u32(0))),
		sec(secMemory, vec([]byte{0x00, 0x01})),
		sec(secExport, vec(exportFunc("loop", 0), exportFunc("recurse", 1), exportFunc("fill", 2))),
		sec(secCode, vec(loop, recurse, fill)),
	)
	metered, st := instrument(t, wasm, 0)
	if st != (Stats{Functions: 3, Loops: 2, Bulk: 1}) {
		t.Errorf("stats = %+v", st)
	}
	for _, fn := range []string{"loop", "recurse", "fill"} {
		t.Run(fn, func(t *testing.T) {
			tk := &ticker{stopAfter: 3}
			m := instantiate(t, newRuntime(t, tk), metered)
			var args []uint64
			if fn == "recurse" {
				args = []uint64{60}
			}
			_, err := m.ExportedFunction(fn).Call(context.Background(), args...)
			var exit *sys.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != stopCode {
				t.Fatalf("err = %v, want the host's exit", err)
			}
			if n := tk.ticks.Load(); n != 3 {
				t.Errorf("%d ticks, want 3", n)
			}
		})
	}
}

// TestBulkCharged: a fill of 64 KiB costs 64 units, so a loop of them ticks
// about 65 times as often as an empty loop.
func TestBulkCharged(t *testing.T) {
	t.Parallel()
	mk := func(fill bool) []byte {
		code := [][]byte{localGet(0), op(i32Eqz), op(opIf, blockEmpty), op(0x0f), op(opEnd),
			op(opLoop, blockEmpty)}
		if fill {
			code = append(code, i32c(0), i32c(0), i32c(65536), fc(11, 0x00))
		}
		code = append(code, localGet(0), i32c(1), op(i32Sub), localSet(0), localGet(0), brIf(0), op(opEnd, opEnd))
		return wasmModule(
			sec(secType, vec(funcType([]byte{typeI32}, nil))),
			sec(secFunction, vec(u32(0))),
			sec(secMemory, vec([]byte{0x00, 0x01})),
			sec(secExport, vec(exportFunc("run", 0))),
			sec(secCode, vec(body(noLocals, code...))),
		)
	}
	ticks := map[bool]int64{}
	for _, fill := range []bool{false, true} {
		metered, _ := instrument(t, mk(fill), 1000)
		tk := &ticker{}
		m := instantiate(t, newRuntime(t, tk), metered)
		if _, err := m.ExportedFunction("run").Call(context.Background(), 10000); err != nil {
			t.Fatal(err)
		}
		ticks[fill] = tk.ticks.Load()
	}
	// 10,000 iterations: 10 ticks at 1 unit each, about 650 at 65 units.
	if ticks[false] < 9 || ticks[false] > 11 || ticks[true] < 600 || ticks[true] > 700 {
		t.Errorf("ticks without fill %d, with fill %d; want about 10 and 650", ticks[false], ticks[true])
	}
}

// TestRefused: what the meter cannot rewrite is refused with a reason.
func TestRefused(t *testing.T) {
	t.Parallel()
	i32 := []byte{typeI32}
	valid := func(code ...[]byte) []byte {
		return wasmModule(
			sec(secType, vec(funcType(nil, i32))),
			sec(secFunction, vec(u32(0))),
			sec(secMemory, vec([]byte{0x00, 0x01})),
			sec(secCode, vec(body(noLocals, code...))),
		)
	}
	for _, c := range []struct {
		name, want string
		wasm       []byte
	}{
		{"empty", "magic", nil},
		{"bad version", "magic", []byte{0x00, 0x61, 0x73, 0x6d, 0x02, 0x00, 0x00, 0x00}},
		{"truncated section", "unexpected end", cat(header, []byte{secType, 0x05, 0x01})},
		{"sections out of order", "out of order", wasmModule(sec(secFunction, vec()), sec(secType, vec()))},
		{"tag section", "exception handling", wasmModule(sec(secTag, vec()))},
		{"threads", "unsupported instruction 0xfe", valid(i32c(0), op(0xfe, 0x10, 0x02, 0x00), op(opEnd))},
		{"try_table", "unsupported instruction 0x1f", valid(op(0x1f, blockEmpty, 0x00, opEnd), i32c(0), op(opEnd))},
		{"multi-memory", "multiple memories", valid(i32c(0), op(0x28, 0x42, 0x00, 0x00), op(opEnd))},
		{"code after end", "after the function's end", valid(i32c(0), op(opEnd), i32c(1))},
		{"no end", "does not end", valid(i32c(0))},
		{"bodies and functions disagree", "bodies for", wasmModule(
			sec(secType, vec(funcType(nil, nil))), sec(secFunction, vec(u32(0), u32(0))),
			sec(secCode, vec(body(noLocals, op(opEnd)))))},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Instrument(c.wasm, 0)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "wasmmeter: ") {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestMissingSections: a module with no type, import or global section gets
// them, in their places.
func TestMissingSections(t *testing.T) {
	t.Parallel()
	wasm := wasmModule(
		sec(secCustom, cat(name("first"), []byte("x"))),
		sec(secFunction, vec()),
		sec(secCode, vec()),
	)
	metered, _ := instrument(t, wasm, 0)
	mustCompile(t, newRuntime(t, &ticker{}), metered)
	// A module with no sections at all.
	metered, _ = instrument(t, header, 0)
	mustCompile(t, newRuntime(t, &ticker{}), metered)
}

// TestPlugins meters the project's built plugins (RELAY_PLUGIN_DIR, set by
// make test): each must still be valid (the interpreter validates as the
// compiler does, and compiles much faster). The plugins package runs them.
func TestPlugins(t *testing.T) {
	t.Parallel()
	files := builtPlugins(t)
	rt := newRuntimeConfig(t, &ticker{}, wazero.NewRuntimeConfigInterpreter())
	for _, f := range files {
		wasm, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		metered, st := instrument(t, wasm, 0)
		if st.Functions < 1000 || st.Loops < 1000 {
			t.Errorf("%s: %+v, a Go module has thousands of functions and loops", f, st)
		}
		mustCompile(t, rt, metered).Close(context.Background())
	}
}

// TestHugeDeclarations: a length larger than what follows it is refused in
// every section, before wazero's decoder (which would allocate it) sees it.
func TestHugeDeclarations(t *testing.T) {
	t.Parallel()
	huge := u32(1 << 31)
	for _, c := range []struct {
		name string
		wasm []byte
	}{
		{"types", wasmModule(sec(secType, huge))},
		{"parameters", wasmModule(sec(secType, cat(u32(1), []byte{0x60}, huge)))},
		{"imports", wasmModule(sec(secImport, huge))},
		{"import name", wasmModule(sec(secImport, cat(u32(1), huge)))},
		{"functions", wasmModule(sec(secFunction, huge))},
		{"tables", wasmModule(sec(secTable, huge))},
		{"memories", wasmModule(sec(secMemory, huge))},
		{"globals", wasmModule(sec(secGlobal, huge))},
		{"exports", wasmModule(sec(secExport, huge))},
		{"elements", wasmModule(sec(secElement, huge))},
		{"element items", wasmModule(sec(secElement, cat(u32(1), u32(1), []byte{0x00}, huge)))},
		{"bodies", wasmModule(sec(secCode, huge))},
		{"locals", wasmModule(
			sec(secType, vec(funcType(nil, nil))), sec(secFunction, vec(u32(0))),
			sec(secCode, vec(body(cat(u32(1), huge, []byte{typeI32}), op(opEnd)))))},
		{"data", wasmModule(sec(secData, huge))},
		{"data bytes", wasmModule(sec(secData, cat(u32(1), u32(1), huge)))},
		{"custom section name", wasmModule(sec(secCustom, huge))},
		{"module name", wasmModule(sec(secCustom, cat(name("name"), []byte{0}, u32(5), huge)))},
		{"function names", wasmModule(sec(secCustom, cat(name("name"), []byte{1}, u32(5), huge)))},
		{"br_table", wasmModule(
			sec(secType, vec(funcType(nil, nil))), sec(secFunction, vec(u32(0))),
			sec(secCode, vec(body(noLocals, op(0x0e), huge, op(opEnd)))))},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := Instrument(c.wasm, 0); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// builtPlugins lists the project's built plugins in RELAY_PLUGIN_DIR (set by
// make test); the test is skipped without it.
func builtPlugins(t *testing.T) []string {
	t.Helper()
	dir := os.Getenv("RELAY_PLUGIN_DIR")
	if dir == "" {
		t.Skip("RELAY_PLUGIN_DIR is not set (make test sets it)")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.wasm"))
	if len(files) == 0 {
		t.Fatalf("no plugins in %s", dir)
	}
	return files
}

// tokensWasm is a real Go plugin, tokens.wasm from RELAY_PLUGIN_DIR; the
// test is skipped without one.
func tokensWasm(tb testing.TB) []byte {
	tb.Helper()
	dir := os.Getenv("RELAY_PLUGIN_DIR")
	if dir == "" {
		tb.Skip("RELAY_PLUGIN_DIR is not set (make test sets it)")
	}
	wasm, err := os.ReadFile(filepath.Join(dir, "tokens.wasm"))
	if err != nil {
		tb.Fatal(err)
	}
	return wasm
}

// BenchmarkInstrument meters a real Go plugin (tokens.wasm from
// RELAY_PLUGIN_DIR): the time it adds to every load of a plugin.
func BenchmarkInstrument(b *testing.B) {
	wasm := tokensWasm(b)
	b.SetBytes(int64(len(wasm)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Instrument(wasm, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNoWayAroundTheMeter: code that only a metered module could validate
// (naming the fuel global, the tick's type or the bulk charge's local), and
// SIMD encodings on which wazero's decoder and a LEB128 decoder disagree
// about where instructions begin, are refused. A guest that could write the
// fuel global would never tick; one that could hide bytes from the meter
// could hide a loop.
func TestNoWayAroundTheMeter(t *testing.T) {
	t.Parallel()
	void := funcType(nil, nil)
	module := func(code ...[]byte) []byte {
		return wasmModule(
			sec(secType, vec(void)),
			sec(secFunction, vec(u32(0))),
			sec(secTable, vec([]byte{0x70, 0x01, 0x01, 0x01})),
			sec(secExport, vec(exportFunc("f", 0))),
			sec(secCode, vec(body(noLocals, code...))),
		)
	}
	v128 := cat([]byte{opPrefixFD, 12}, make([]byte, 16))
	for _, c := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"refill the fuel in a loop", module(op(opLoop, blockEmpty), i32c(math.MaxInt32), op(opGlobalSet), u32(0), br(0), op(opEnd, opEnd)),
			"index 0 out of range"},
		{"read the fuel", module(op(opGlobalGet), u32(0), op(0x1a, opEnd)), "index 0 out of range"},
		{"the bulk charge's local", module(i32c(1), localSet(0), op(opEnd)), "index 0 out of range"},
		{"the tick's type by call_indirect", module(i32c(0), op(opCallIndirect), u32(1), u32(0), op(opEnd)), "index 1 out of range"},
		{"the tick's type as a block type", module(op(opBlock), s32(1), op(opEnd, opEnd)), "index 1 out of range"},
		{"SIMD sub-opcode continuing into a block", module(v128, op(opPrefixFD, 0x80, 0x02, 0x40), op(opEnd), op(0x1a, opEnd)),
			"sub-opcode continues"},
		{"over-long SIMD sub-opcode hiding 16 bytes", module(v128, op(opPrefixFD, 0x8c, 0x00), make([]byte, 16), op(0x1a, opEnd)),
			"sub-opcode continues"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Instrument(c.wasm, 0)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}

	// A two-byte SIMD sub-opcode in its only form (i16x8.abs: 0x80 0x01)
	// is metered and runs.
	simd := wasmModule(
		sec(secType, vec(funcType(nil, []byte{typeI32}))),
		sec(secFunction, vec(u32(0))),
		sec(secExport, vec(exportFunc("f", 0))),
		sec(secCode, vec(body(noLocals, v128, op(opPrefixFD, 0x80, 0x01), op(opPrefixFD, 0x83, 0x01), op(opEnd)))), // i16x8.abs, v128.any_true
	)
	metered, _ := instrument(t, simd, 0)
	res, err := instantiate(t, newRuntime(t, &ticker{}), metered).ExportedFunction("f").Call(context.Background())
	if err != nil || res[0] != 0 {
		t.Errorf("f() = %v, %v; want 0", res, err)
	}
}

// TestImportCallsTick: a host function can take long on its own, so every
// call into one, direct or through a table, is preceded by a check of the
// deadline: exactly one tick per call, with fuel to spare otherwise.
func TestImportCallsTick(t *testing.T) {
	t.Parallel()
	tk := &ticker{}
	m := instantiate(t, newRuntime(t, tk), mustInstrument(t, renumberModule()))
	for _, c := range []struct {
		fn    string
		arg   uint64
		ticks int64
	}{{"double", 21, 0}, {"getG", 1, 1}, {"viaTable", 0, 1}, {"viaTable", 1, 0}} {
		before := tk.ticks.Load()
		call1(t, m, c.fn, c.arg)
		if got := tk.ticks.Load() - before; got != c.ticks {
			t.Errorf("%s(%d): %d ticks, want %d", c.fn, c.arg, got, c.ticks)
		}
	}
}

func mustInstrument(t testing.TB, wasm []byte) []byte {
	out, _ := instrument(t, wasm, 0)
	return out
}

// TestTablesCapped: a table's memory is outside the memory limit, so a
// table gets at most MaxTableSize elements: one without a maximum gets
// that one (growing past it fails, as the specification allows), and one
// that needs more is refused.
func TestTablesCapped(t *testing.T) {
	t.Parallel()
	i32 := []byte{typeI32}
	grow := body(noLocals, op(0xd0, 0x70), localGet(0), fc(15, 0x00), op(opEnd)) // table.grow 0 (ref.null func, n)
	module := func(table []byte) []byte {
		return wasmModule(
			sec(secType, vec(funcType(i32, i32))),
			sec(secFunction, vec(u32(0))),
			sec(secTable, vec(table)),
			sec(secExport, vec(exportFunc("grow", 0))),
			sec(secCode, vec(grow)),
		)
	}
	m := instantiate(t, newRuntime(t, &ticker{}), mustInstrument(t, module([]byte{0x70, 0x00, 0x01})))
	if got := int32(call1(t, m, "grow", MaxTableSize)); got != -1 {
		t.Errorf("growing past %d elements: %d, want -1", MaxTableSize, got)
	}
	if got := int32(call1(t, m, "grow", 10)); got != 1 {
		t.Errorf("grow(10) = %d, want the old size 1", got)
	}
	if _, _, err := Instrument(module(cat([]byte{0x70, 0x00}, u32(MaxTableSize+1))), 0); err == nil {
		t.Error("a table of more than MaxTableSize elements accepted")
	}
	imported := wasmModule(sec(secImport, vec(cat(name("env"), name("t"), []byte{0x01, 0x70, 0x00, 0x01}))))
	if _, _, err := Instrument(imported, 0); err == nil || !strings.Contains(err.Error(), "without a maximum") {
		t.Errorf("an imported table without a maximum: %v", err)
	}
}

// TestSecondReview: what a second review of the meter found.
func TestSecondReview(t *testing.T) {
	t.Parallel()
	void := funcType(nil, nil)
	t.Run("the table cap holds for all tables together", func(t *testing.T) {
		full := cat([]byte{0x70, 0x00}, u32(MaxTableSize))
		if _, _, err := Instrument(wasmModule(sec(secTable, vec(full, full))), 0); err == nil {
			t.Error("two tables of MaxTableSize elements each accepted")
		}
		// Two tables without a maximum share the budget: the first takes it.
		grow := body(noLocals, op(0xd0, 0x70), localGet(0), fc(15, 0x01), op(opEnd)) // table.grow 1
		wasm := wasmModule(
			sec(secType, vec(funcType([]byte{typeI32}, []byte{typeI32}))),
			sec(secFunction, vec(u32(0))),
			sec(secTable, vec([]byte{0x70, 0x00, 0x00}, []byte{0x70, 0x00, 0x00})),
			sec(secExport, vec(exportFunc("grow", 0))),
			sec(secCode, vec(grow)),
		)
		m := instantiate(t, newRuntime(t, &ticker{}), mustInstrument(t, wasm))
		if got := int32(call1(t, m, "grow", 1)); got != -1 {
			t.Errorf("growing the second table: %d, want -1 (no budget left)", got)
		}
	})
	t.Run("imports without a function section are wrapped", func(t *testing.T) {
		// Module a: imports add1, puts it in an exported table, has no code.
		a := wasmModule(
			sec(secType, vec(funcType([]byte{typeI32}, []byte{typeI32}))),
			sec(secImport, vec(importFunc("env", "add1", 0))),
			sec(secTable, vec([]byte{0x70, 0x01, 0x01, 0x01})),
			sec(secExport, vec(cat(name("t"), []byte{0x01}, u32(0)))),
			sec(secElement, vec(cat(u32(0), i32c(0), op(opEnd), vec(u32(0))))),
		)
		// Module b: calls table[0] of a.
		b := wasmModule(
			sec(secType, vec(funcType([]byte{typeI32}, []byte{typeI32}))),
			sec(secImport, vec(cat(name("a"), name("t"), []byte{0x01, 0x70, 0x01, 0x01, 0x01}))),
			sec(secFunction, vec(u32(0))),
			sec(secExport, vec(exportFunc("f", 0))),
			sec(secCode, vec(body(noLocals, localGet(0), i32c(0), op(opCallIndirect), u32(0), u32(0), op(opEnd)))),
		)
		tk := &ticker{}
		rt := newRuntime(t, tk)
		ctx := context.Background()
		if _, err := rt.InstantiateModule(ctx, mustCompile(t, rt, mustInstrument(t, a)), wazero.NewModuleConfig().WithName("a")); err != nil {
			t.Fatal(err)
		}
		if got := call1(t, instantiate(t, rt, mustInstrument(t, b)), "f", 41); got != 42 {
			t.Errorf("f(41) = %d, want add1's 42", got)
		}
		if n := tk.ticks.Load(); n != 1 {
			t.Errorf("%d ticks, want the wrapper's 1", n)
		}
	})
	for _, c := range []struct {
		name string
		wasm []byte
	}{
		{"a call past the last function", wasmModule(
			sec(secType, vec(void)), sec(secFunction, vec(u32(0))),
			sec(secCode, vec(body(noLocals, call(1), op(opEnd)))))},
		{"an export past the last function", wasmModule(
			sec(secType, vec(void)), sec(secFunction, vec(u32(0))),
			sec(secExport, vec(exportFunc("f", 1))),
			sec(secCode, vec(body(noLocals, op(opEnd)))))},
		{"elem.drop of a segment the module lacks", wasmModule(
			sec(secType, vec(void)), sec(secImport, vec(importFunc("env", "f", 0))), sec(secFunction, vec(u32(0))),
			sec(secCode, vec(body(noLocals, fc(13, 0x00), op(opEnd)))))},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := Instrument(c.wasm, 0); err == nil || !strings.Contains(err.Error(), "out of range") {
				t.Fatalf("err = %v, want an index out of range", err)
			}
		})
	}
}
