package plugins

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

// wasmFunc is one exported function of a hand-assembled module.
type wasmFunc struct {
	name            string
	params, results []byte // value types: 0x7f i32, 0x7e i64
	body            []byte // instructions, without the final end
}

// wasmModule assembles a minimal WebAssembly binary exporting funcs (and a
// one-page memory named "memory" when memory is set). It lets the export
// checks be tested on modules no Go toolchain would produce.
func wasmModule(funcs []wasmFunc, memory bool) []byte {
	section := func(id byte, items [][]byte) []byte {
		var body []byte
		body = append(body, byte(len(items)))
		for _, it := range items {
			body = append(body, it...)
		}
		return append([]byte{id, byte(len(body))}, body...)
	}
	vec := func(b []byte) []byte { return append([]byte{byte(len(b))}, b...) }
	var types, fns, exports, codes [][]byte
	for i, f := range funcs {
		types = append(types, append(append([]byte{0x60}, vec(f.params)...), vec(f.results)...))
		fns = append(fns, []byte{byte(i)})
		exports = append(exports, append(vec([]byte(f.name)), 0x00, byte(i)))
		body := append([]byte{0x00}, f.body...) // no locals
		body = append(body, 0x0b)
		codes = append(codes, vec(body))
	}
	out := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	if len(funcs) > 0 {
		out = append(out, section(1, types)...)
		out = append(out, section(3, fns)...)
	}
	if memory {
		out = append(out, section(5, [][]byte{{0x00, 0x01}})...)
		exports = append(exports, append(vec([]byte("memory")), 0x02, 0x00))
	}
	if len(exports) > 0 {
		out = append(out, section(7, exports)...)
	}
	if len(funcs) > 0 {
		out = append(out, section(10, codes)...)
	}
	return out
}

const (
	i32 = 0x7f
	i64 = 0x7e
)

var (
	goodVersion = wasmFunc{"mr_abi_version", nil, []byte{i32}, []byte{0x41, 0x02}}
	goodAlloc   = wasmFunc{"mr_alloc", []byte{i32}, []byte{i32}, []byte{0x20, 0x00}}
	goodCall    = wasmFunc{"mr_call", []byte{i32, i32, i32}, []byte{i64}, []byte{0x42, 0x00}}
)

func TestCheckExports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	cases := []struct {
		name    string
		funcs   []wasmFunc
		memory  bool
		wantErr string
	}{
		{name: "complete", funcs: []wasmFunc{goodVersion, goodAlloc, goodCall}, memory: true},
		{name: "empty module", wantErr: "no export mr_abi_version"},
		{name: "no alloc", funcs: []wasmFunc{goodVersion, goodCall}, memory: true, wantErr: "no export mr_alloc"},
		{name: "command", funcs: []wasmFunc{{"_start", nil, nil, nil}}, wantErr: "build it with -buildmode=c-shared"},
		{name: "command with exports", funcs: []wasmFunc{goodVersion, goodAlloc, goodCall, {"_start", nil, nil, nil}}, memory: true, wantErr: "exports _start, not _initialize"},
		{name: "reactor with _start", funcs: []wasmFunc{goodVersion, goodAlloc, goodCall, {"_start", nil, nil, nil}, {"_initialize", nil, nil, nil}}, memory: true},
		{name: "version returns i64", funcs: []wasmFunc{{"mr_abi_version", nil, []byte{i64}, []byte{0x42, 0x01}}, goodAlloc, goodCall}, memory: true,
			wantErr: "export mr_abi_version has type func() i64, want func() i32"},
		{name: "call returns i32", funcs: []wasmFunc{goodVersion, goodAlloc, {"mr_call", []byte{i32, i32, i32}, []byte{i32}, []byte{0x41, 0x00}}}, memory: true,
			wantErr: "export mr_call has type func(i32, i32, i32) i32, want func(i32, i32, i32) i64"},
		{name: "alloc takes two", funcs: []wasmFunc{goodVersion, {"mr_alloc", []byte{i32, i32}, []byte{i32}, []byte{0x20, 0x00}}, goodCall}, memory: true,
			wantErr: "export mr_alloc has type func(i32, i32) i32"},
		{name: "no memory", funcs: []wasmFunc{goodVersion, goodAlloc, goodCall}, wantErr: `no exported memory named "memory"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wasm := wasmModule(tc.funcs, tc.memory)
			m, err := rt.CompileModule(ctx, wasm)
			if err != nil {
				t.Fatalf("the test module does not compile: %v", err)
			}
			defer m.Close(ctx)
			err = checkExports(wasm)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrABI) {
				t.Fatalf("err = %v, want ErrABI containing %q", err, tc.wantErr)
			}
		})
	}
}
