package wasmmeter

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// seg is an active data segment of memory 0 at offset off.
func seg(off int32, init string) []byte {
	return cat(u32(0), i32c(off), op(opEnd), u32(uint32(len(init))), []byte(init))
}

// dataModule is a module of one page of memory and the data segments segs,
// with a data count section when count is set.
func dataModule(count bool, segs ...[]byte) []byte {
	ss := [][]byte{sec(secMemory, vec([]byte{0x00, 0x01}))}
	if count {
		ss = append(ss, sec(secDataCount, u32(uint32(len(segs)))))
	}
	return wasmModule(append(ss, sec(secData, vec(segs...)))...)
}

// memoryAfter instantiates wasm (starting nothing) and returns a copy of its
// memory, or the instantiation's error.
func memoryAfter(t *testing.T, rt wazero.Runtime, wasm []byte) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	m, err := rt.InstantiateModule(ctx, mustCompile(t, rt, wasm), wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, err
	}
	defer m.Close(ctx)
	b, _ := m.Memory().Read(0, m.Memory().Size())
	return bytes.Clone(b), nil
}

func TestJoinDataSegments(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		wasm   []byte
		joined int // segments after; 0: left as they were
	}{
		{"adjacent and small gaps join", dataModule(false, seg(16, "ab"), seg(18, "cd"), seg(30, "ef"), seg(32+maxDataGap, "gh")), 1},
		{"a gap longer than maxDataGap splits", dataModule(false, seg(16, "ab"), seg(18+maxDataGap+1, "cd"), seg(85+maxDataGap, "ef")), 2},
		{"a lower offset starts a new segment", dataModule(false, seg(100, "ab"), seg(104, "cd"), seg(10, "ef"), seg(14, "gh")), 2},
		{"another segment in the gap keeps it open", dataModule(false, seg(10, "ab"), seg(30, "cd"), seg(20, "XY")), 0},
		{"overlapping segments are left alone", dataModule(false, seg(10, "abcd"), seg(12, "XY"), seg(20, "ef")), 0},
		{"a data count section is left alone", dataModule(true, seg(10, "ab"), seg(12, "cd")), 0},
		{"a passive segment is left alone", dataModule(false, seg(10, "ab"), cat(u32(1), u32(2), []byte("cd")), seg(12, "ef")), 0},
		{"empty segments join", dataModule(false, seg(10, ""), seg(10, "ab"), seg(12, ""), seg(13, "c")), 1},
		{"one segment", dataModule(false, seg(10, "ab")), 0},
		{"out of bounds still fails", dataModule(false, seg(65530, "abcd"), seg(65534, "efgh")), 1},
		{"an empty segment inside a segment does not zero its end", dataModule(false, seg(5, "abcdef"), seg(10, ""), seg(12, "c")), 0},
		{"negative offsets are high addresses", dataModule(false, seg(-4, "ab"), seg(-1, "")), 1},
	}
	rt := newRuntime(t, &ticker{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			metered, st, err := Instrument(c.wasm, 0)
			if err != nil {
				t.Fatal(err)
			}
			if st.DataSegmentsJoined != c.joined {
				t.Errorf("joined into %d segments (of %d), want %d", st.DataSegmentsJoined, st.DataSegments, c.joined)
			}
			want, werr := memoryAfter(t, rt, c.wasm)
			got, gerr := memoryAfter(t, rt, metered)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("instantiation: original %v, metered %v", werr, gerr)
			}
			if strings.Contains(c.name, "fails") && werr == nil {
				t.Fatal("the original instantiated: the case tests nothing")
			}
			if !bytes.Equal(got, want) {
				t.Error("the metered module's memory differs from the original's")
			}
		})
	}
}

// TestDataNotJoined: a module that imports its memory, or writes an offset
// wazero refuses, keeps its data section as it was.
func TestDataNotJoined(t *testing.T) {
	t.Parallel()
	segs := sec(secData, vec(seg(10, "ab"), seg(12, "cd")))
	imported := wasmModule(sec(secImport, vec(cat(name("env"), name("mem"), []byte{0x02, 0x00, 0x01}))), segs)
	// i32.const 0 as five bytes whose last does not sign-extend bit 31.
	badOff := cat(u32(0), []byte{opI32Const, 0x80, 0x80, 0x80, 0x80, 0x10, opEnd}, u32(2), []byte("ab"))
	unsigned := wasmModule(sec(secMemory, vec([]byte{0x00, 0x01})), sec(secData, vec(badOff, seg(2, "cd"))))
	for name, wasm := range map[string][]byte{"imported memory": imported, "non-canonical offset": unsigned} {
		_, st, err := Instrument(wasm, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st.DataSegmentsJoined != 0 {
			t.Errorf("%s: joined into %d segments", name, st.DataSegmentsJoined)
		}
	}
}

// TestJoinGoDataSegments: a Go module (a first-party plugin, when built)
// starts with the same memory with its data segments joined, and has few.
func TestJoinGoDataSegments(t *testing.T) {
	t.Parallel()
	wasm := tokensWasm(t)
	metered, st, err := Instrument(wasm, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.DataSegments < 1000 || st.DataSegmentsJoined > 100 {
		t.Errorf("%d data segments joined into %d; want thousands into at most 100", st.DataSegments, st.DataSegmentsJoined)
	}
	rt := newRuntime(t, &ticker{})
	wasi_snapshot_preview1.MustInstantiate(context.Background(), rt)
	want, err := memoryAfter(t, rt, wasm)
	if err != nil {
		t.Fatal(err)
	}
	got, err := memoryAfter(t, rt, metered)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("the metered plugin's memory differs from the original's")
	}
}

// FuzzJoinData: whatever the segments (overlapping, out of order, empty,
// out of bounds), the metered module starts with the memory the original
// starts with, or fails to start as it does. The input is a list of
// segments, each an offset (two bytes, a little-endian int16: a negative
// one is an address near 4 GiB, and the memory is one page), a length byte
// and that many bytes.
func FuzzJoinData(f *testing.F) {
	f.Add([]byte{10, 0, 2, 'a', 'b', 12, 0, 2, 'c', 'd', 50, 0, 1, 'e'})
	f.Add([]byte{10, 0, 4, 'a', 'b', 'c', 'd', 12, 0, 1, 'X', 0, 0, 0})
	f.Add([]byte{0xfe, 0xff, 4, 1, 2, 3, 4})
	f.Add([]byte{5, 0, 6, 'a', 'b', 'c', 'd', 'e', 'f', 10, 0, 0, 12, 0, 1, 'c'})
	rt := newRuntime(f, &ticker{})
	f.Fuzz(func(t *testing.T, in []byte) {
		var segs [][]byte
		for len(in) >= 3 && len(segs) < 64 {
			off, n := int32(int16(uint16(in[0])|uint16(in[1])<<8)), int(in[2])
			in = in[3:]
			n = min(n, len(in))
			segs = append(segs, seg(off, string(in[:n])))
			in = in[n:]
		}
		wasm := dataModule(false, segs...)
		metered, _, err := Instrument(wasm, 0)
		if err != nil {
			t.Fatal(err)
		}
		want, werr := memoryAfter(t, rt, wasm)
		got, gerr := memoryAfter(t, rt, metered)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("instantiation: original %v, metered %v", werr, gerr)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("the metered module's memory differs from the original's")
		}
	})
}
