package wasmmeter

import "fmt"

// FuncType is a function's type: its parameters' and results' value types,
// as the binary encodes them (the values of wazero's api.ValueType).
type FuncType struct{ Params, Results []byte }

// Exports is what a module exports, as an embedder checks it before use.
type Exports struct {
	Funcs    map[string]FuncType // exported functions, by export name
	Memories []string            // names of the exported memories
}

// ReadExports reads the exports of a module and the types of the exported
// functions, without decoding any code.
//
// wazero can tell the same (CompiledModule.ExportedFunctions), but it builds
// a definition of every function of the module to do so and keeps them for
// as long as the module is loaded: for a Go module of a few thousand
// functions, about 380 KB of pointers that every garbage collection scans,
// half of what a loaded plugin adds to the collector's work.
func ReadExports(wasm []byte) (Exports, error) {
	m, err := parse(wasm)
	if err != nil {
		return Exports{}, err
	}
	ex := Exports{Funcs: map[string]FuncType{}}
	for _, s := range m.sections {
		if s.id != secExport {
			continue
		}
		r := &reader{b: s.body}
		n := r.count(3)
		for i := 0; i < n && r.err == nil; i++ {
			name := r.name()
			kind := r.byte()
			idx := r.u32()
			if r.err != nil {
				break
			}
			switch kind {
			case 0x00:
				var typ uint32
				switch {
				case idx < m.funcImports:
					typ = m.importTypes[idx]
				case idx < m.funcsEnd:
					typ = m.funcTypes[idx-m.funcImports]
				default:
					r.fail("export %q: function index %d out of range", name, idx)
					continue
				}
				if uint64(typ) >= uint64(len(m.types)) {
					r.fail("export %q: type index %d out of range", name, typ)
					continue
				}
				ex.Funcs[name] = m.types[typ]
			case 0x02:
				ex.Memories = append(ex.Memories, name)
			}
		}
		if err := endOf(r); err != nil {
			return Exports{}, fmt.Errorf("section %d: %w", s.id, err)
		}
	}
	return ex, nil
}
