package wasmmeter

// Opcodes the instrumentation reads or writes.
const (
	opUnreachable  = 0x00
	opBlock        = 0x02
	opLoop         = 0x03
	opIf           = 0x04
	opElse         = 0x05
	opEnd          = 0x0b
	opCall         = 0x10
	opCallIndirect = 0x11
	opReturnCall   = 0x12
	opReturnCallI  = 0x13
	opLocalGet     = 0x20
	opLocalSet     = 0x21
	opGlobalGet    = 0x23
	opGlobalSet    = 0x24
	opI32Const     = 0x41
	opI32LeS       = 0x4c
	opI32Sub       = 0x6b
	opI32ShrU      = 0x76
	opRefFunc      = 0xd2
	opPrefixFC     = 0xfc
	opPrefixFD     = 0xfd

	blockEmpty = 0x40
	typeI32    = 0x7f
)

// instr is one decoded instruction: its opcode, the sub-opcode of a
// prefixed one, where its bytes lie, and the index it names, if it is one
// the meter checks or renumbers: a function (call, return_call, ref.func),
// a local, a global, or a type (call_indirect, return_call_indirect, a
// block type given by index); noIndex otherwise.
type instr struct {
	op         byte
	sub        uint32
	start, end int
	idx        uint32
}

const noIndex = ^uint32(0)

// callsFunc reports whether the instruction names a function index.
func (in *instr) callsFunc() bool {
	return in.op == opCall || in.op == opReturnCall || in.op == opRefFunc
}

// kind is what in.idx is an index of.
func (in *instr) kind() uint8 {
	if in.idx == noIndex {
		return immNone
	}
	switch k := immediates[in.op]; k {
	case immBlock, immIndirect:
		return immType
	case immFC:
		return immElem
	default:
		return k
	}
}

// bulk reports whether the instruction is a bulk memory or table operation
// whose cost grows with its last operand, an i32 count of bytes or elements:
// memory.init, memory.copy, memory.fill, table.init, table.copy, table.grow,
// table.fill.
func (in *instr) bulk() bool {
	if in.op != opPrefixFC {
		return false
	}
	switch in.sub {
	case 8, 10, 11, 12, 14, 15, 17:
		return true
	}
	return false
}

// isValType reports whether c is a value type of WebAssembly 2.0.
func isValType(c byte) bool {
	switch c {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		return true
	}
	return false
}

// What follows an opcode, by opcode (see next).
const (
	immBad      = iota // not an instruction the meter knows
	immNone            // nothing
	immU32             // one u32: br, br_if, table.get/set, memory.size/grow
	immLocal           // a local index
	immGlobal          // a global index
	immBlock           // a block type
	immBrTable         // a vector of u32 and a u32
	immFunc            // a function index: call, return_call, ref.func
	immIndirect        // a type index and a table index: call_indirect, return_call_indirect
	immSelect          // a vector of value types
	immMemarg          // alignment and offset
	immS32             // i32.const
	immS64             // i64.const
	imm4               // f32.const
	imm8               // f64.const
	immRefType         // ref.null
	immFC              // the 0xfc prefix
	immFD              // the 0xfd prefix (SIMD)
	immType            // not an immediate: what instr.kind says of a type index
	immElem            // … and of an element segment index
)

var immediates = func() (k [256]uint8) {
	for _, op := range []int{0x00, 0x01, opElse, opEnd, 0x0f, 0x1a, 0x1b, 0xd1} {
		k[op] = immNone
	}
	for op := 0x45; op <= 0xc4; op++ {
		k[op] = immNone
	}
	for _, op := range []int{0x0c, 0x0d, 0x3f, 0x40} {
		k[op] = immU32
	}
	k[0x20], k[0x21], k[0x22] = immLocal, immLocal, immLocal
	k[opGlobalGet], k[opGlobalSet] = immGlobal, immGlobal
	k[0x25], k[0x26] = immU32, immU32
	for op := 0x28; op <= 0x3e; op++ {
		k[op] = immMemarg
	}
	k[opBlock], k[opLoop], k[opIf] = immBlock, immBlock, immBlock
	k[0x0e] = immBrTable
	k[opCall], k[opReturnCall], k[opRefFunc] = immFunc, immFunc, immFunc
	k[opCallIndirect], k[opReturnCallI] = immIndirect, immIndirect
	k[0x1c] = immSelect
	k[opI32Const], k[0x42], k[0x43], k[0x44] = immS32, immS64, imm4, imm8
	k[0xd0] = immRefType
	k[opPrefixFC], k[opPrefixFD] = immFC, immFD
	// Everything else stays immBad: 0x06–0x0a, 0x18, 0x19, 0x1f (exception
	// handling), 0xfe (threads) and the unassigned.
	return k
}()

// next decodes the instruction at r into in. It knows every instruction of
// WebAssembly 2.0 (the core features wazero enables by default: bulk memory,
// multi-value, non-trapping conversions, reference types, sign extension,
// SIMD) and the tail calls; anything else (exception handling, threads, GC,
// memory64) is refused, so that no instruction's immediates are mistaken for
// code. Immediates are skipped, not checked (wazero validates them), except
// a function index, which is read.
func next(r *reader, in *instr) {
	in.start = r.off
	in.sub = 0
	in.idx = noIndex
	if r.err != nil || r.off >= len(r.b) {
		in.op = r.byte()
		in.end = r.off
		return
	}
	op := r.b[r.off]
	r.off++
	in.op = op
	switch immediates[op] {
	case immNone:
	case immU32:
		r.skipLEB(5)
	case immLocal, immGlobal, immFunc:
		in.idx = r.u32()
	case immBlock:
		in.idx = blockType(r)
	case immBrTable:
		n := r.count(1)
		for i := 0; i <= n && r.err == nil; i++ {
			r.skipLEB(5)
		}
	case immIndirect:
		in.idx = r.u32()
		r.skipLEB(5)
	case immSelect:
		n := r.count(1)
		for i := 0; i < n && r.err == nil; i++ {
			if c := r.byte(); !isValType(c) {
				r.fail("select: unknown value type %#x", c)
			}
		}
	case immMemarg:
		memarg(r)
	case immS32:
		r.skipLEB(5)
	case immS64:
		r.skipLEB(10)
	case imm4:
		r.bytes(4)
	case imm8:
		r.bytes(8)
	case immRefType:
		if c := r.byte(); c != 0x70 && c != 0x6f {
			r.fail("ref.null: unknown reference type %#x", c)
		}
	case immFC:
		prefixFC(r, in)
	case immFD:
		prefixFD(r, in)
	default:
		r.off--
		r.fail("unsupported instruction %#x", op)
	}
	in.end = r.off
}

// prefixFC decodes the rest of an 0xfc instruction (saturating
// conversions, bulk memory, table operations) into in: its sub-opcode and,
// for table.init and elem.drop, the element segment index.
func prefixFC(r *reader, in *instr) {
	in.sub = r.u32()
	switch in.sub {
	case 0, 1, 2, 3, 4, 5, 6, 7: // saturating conversions
	case 12: // table.init: element segment, table
		in.idx = r.u32()
		r.skipLEB(5)
	case 13: // elem.drop: element segment
		in.idx = r.u32()
	case 8, 10, 14: // memory.init, memory.copy, table.copy
		r.skipLEB(5)
		r.skipLEB(5)
	case 9, 11, 15, 16, 17: // data.drop, memory.fill, table.grow/size/fill
		r.skipLEB(5)
	default:
		r.fail("unknown instruction 0xfc %d", in.sub)
	}
}

// prefixFD decodes the rest of an 0xfd (SIMD) instruction into in: its
// sub-opcode, then skips its immediates.
//
// wazero reads the sub-opcode as one byte, not as the LEB128 the
// specification says, and the second byte of a two-byte one (0x80 and
// above: 0x01) then decodes as a nop. Any other second byte would let the
// two decoders disagree on where instructions begin, which could hide code
// from the meter: it is refused.
func prefixFD(r *reader, in *instr) {
	in.sub = uint32(r.byte())
	if in.sub >= 0x80 {
		if c := r.byte(); c != 0x01 && r.err == nil {
			r.fail("instruction 0xfd %#x: LEB128 sub-opcode continues with %#x", in.sub, c)
		}
	}
	switch s := in.sub; {
	case s <= 11 || s == 92 || s == 93: // loads, store, load_zero
		memarg(r)
	case s == 12 || s == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case s >= 21 && s <= 34: // extract_lane, replace_lane
		r.byte()
	case s >= 84 && s <= 91: // load_lane, store_lane
		memarg(r)
		r.byte()
	default: // the rest have no immediates
	}
}

// blockType skips a block type (empty, or a value type) and returns
// noIndex, or reads one given by type index (s33) and returns it.
func blockType(r *reader) uint32 {
	if r.err != nil || r.off >= len(r.b) {
		r.byte()
		return noIndex
	}
	if c := r.b[r.off]; c == blockEmpty || isValType(c) {
		r.off++
		return noIndex
	}
	v := r.signed(33)
	if r.err == nil && (v < 0 || v >= int64(noIndex)) {
		r.fail("block type %d", v)
	}
	return uint32(v)
}

// memarg skips a memory argument: alignment (bit 6 set: a memory index
// follows, multi-memory) and offset.
func memarg(r *reader) {
	if align := r.u32(); align&0x40 != 0 {
		r.fail("multiple memories are not supported")
	}
	r.skipLEB(5)
}
