package wasmmeter

// A minimal WebAssembly encoder for the tests' hand-made modules.

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func u32(v uint32) []byte { return appendU32(nil, v) }

func s32(v int32) []byte { return appendS32(nil, v) }

// vec is a vector of already-encoded items.
func vec(items ...[]byte) []byte { return cat(u32(uint32(len(items))), cat(items...)) }

func sec(id byte, body []byte) []byte { return cat([]byte{id}, u32(uint32(len(body))), body) }

func wasmModule(sections ...[]byte) []byte { return cat(header, cat(sections...)) }

func name(s string) []byte { return appendName(nil, s) }

func funcType(params, results []byte) []byte {
	return cat([]byte{0x60}, u32(uint32(len(params))), params, u32(uint32(len(results))), results)
}

// body is a function body: local declarations (already a vector) and code
// (which must end with 0x0b).
func body(locals []byte, code ...[]byte) []byte {
	b := cat(locals, cat(code...))
	return cat(u32(uint32(len(b))), b)
}

func exportFunc(n string, idx uint32) []byte { return cat(name(n), []byte{0x00}, u32(idx)) }

func importFunc(module, field string, typ uint32) []byte {
	return cat(name(module), name(field), []byte{0x00}, u32(typ))
}

// Instructions.
func i32c(v int32) []byte               { return cat([]byte{opI32Const}, s32(v)) }
func localGet(i uint32) []byte          { return cat([]byte{opLocalGet}, u32(i)) }
func localSet(i uint32) []byte          { return cat([]byte{opLocalSet}, u32(i)) }
func call(i uint32) []byte              { return cat([]byte{opCall}, u32(i)) }
func br(depth uint32) []byte            { return cat([]byte{0x0c}, u32(depth)) }
func brIf(depth uint32) []byte          { return cat([]byte{0x0d}, u32(depth)) }
func op(codes ...byte) []byte           { return codes }
func fc(sub uint32, imm ...byte) []byte { return cat([]byte{opPrefixFC}, u32(sub), imm) }

const (
	i32Add = 0x6a
	i32Sub = 0x6b
	i32Mul = 0x6c
	i32Eqz = 0x45
	i32GtS = 0x4a
)

var noLocals = u32(0)

func locals(n uint32, t byte) []byte { return cat(u32(1), u32(n), []byte{t}) }
