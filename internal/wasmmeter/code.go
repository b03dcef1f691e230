package wasmmeter

import (
	"errors"
	"fmt"
)

// maxLocals is the most locals (parameters included) a function may have,
// the limit web browsers apply; a Go function has a few dozen.
const maxLocals = 50_000

// codeSection meters every function body (body is nil for a module
// without code) and appends the wrappers' bodies.
func (m *module) codeSection(body []byte) ([]byte, error) {
	r := &reader{b: body}
	var n int
	if body != nil {
		n = r.count(2)
	}
	if r.err == nil && n != len(m.funcTypes) {
		return nil, fmt.Errorf("%d bodies for %d declared functions", n, len(m.funcTypes))
	}
	out := appendU32(make([]byte, 0, len(body)*5/4), uint32(n+len(m.importTypes)))
	var sc scratch
	for i := 0; i < n && r.err == nil; i++ {
		fb := r.bytes(int(r.u32()))
		if r.err != nil {
			break
		}
		var err error
		if out, err = m.function(out, i, fb, &sc); err != nil {
			return nil, fmt.Errorf("function %d: %w", uint64(m.funcImports)+uint64(i), err)
		}
		m.stats.Functions++
	}
	if err := endOf(r); err != nil {
		return nil, err
	}
	for i := range m.funcImports {
		out = m.wrapper(out, i)
	}
	return out, nil
}

// scratch is reused from body to body.
type scratch struct {
	open  []block // the enclosing blocks
	code  []byte  // the metered code of the body
	entry []byte  // its charge at entry
}

// block is an open block, loop or if. For a loop, patch is where its
// charge's cost is in scratch.code and start where its body begins in the
// original; patch is -1 for the others.
type block struct{ patch, start int }

// function appends body i metered, with its size, to out: a charge at entry,
// a charge after every loop header, and a charge before every bulk
// operation (which needs one i32 local more, to hold the operation's count
// while it is charged). A loop's charge depends on the length of its body,
// known at its end: it is written with a placeholder of five bytes (a LEB128
// may be padded) and patched then. It also checks that the blocks nest and
// that the body ends with its end.
func (m *module) function(out []byte, i int, b []byte, sc *scratch) ([]byte, error) {
	typ := m.funcTypes[i]
	if uint64(typ) >= uint64(len(m.types)) {
		return nil, fmt.Errorf("type index %d out of range", typ)
	}
	r := &reader{b: b}
	decls := r.count(2)
	declStart := r.off
	locals, err := m.locals(r, typ, decls)
	if err != nil {
		return nil, err
	}
	codeStart := r.off
	hasBulk, err := m.meterCode(r, b, locals, sc)
	if err != nil {
		return nil, err
	}

	sc.entry = m.charge(sc.entry[:0], len(b)-codeStart)
	header := codeStart // the local declarations, count included
	if hasBulk {
		header = len(appendU32(nil, uint32(decls+1))) + codeStart - declStart + 2
	}
	out = appendU32(out, uint32(header+len(sc.entry)+len(sc.code)))
	if hasBulk {
		out = appendU32(out, uint32(decls+1))
		out = append(out, b[declStart:codeStart]...)
		out = append(out, 0x01, typeI32)
	} else {
		out = append(out, b[:codeStart]...)
	}
	out = append(out, sc.entry...)
	return append(out, sc.code...), nil
}

// locals reads the body's decls local declarations at r and returns how
// many locals the function has, its parameters (of type typ) included.
func (m *module) locals(r *reader, typ uint32, decls int) (uint64, error) {
	locals := uint64(len(m.types[typ].Params))
	for j := 0; j < decls && r.err == nil; j++ {
		locals += uint64(r.u32())
		if c := r.byte(); !isValType(c) {
			r.fail("local: unknown value type %#x", c)
		}
	}
	if r.err != nil {
		return 0, r.err
	}
	if locals > maxLocals {
		return 0, fmt.Errorf("%d locals, more than %d", locals, maxLocals)
	}
	return locals, nil
}

// meterCode copies the instructions at r (of body b, with locals locals)
// into sc.code with their charges: after every loop header (patched at the
// loop's end) and before every bulk operation, whose count it keeps in a
// new local after the others. It reports whether there was one.
func (m *module) meterCode(r *reader, b []byte, locals uint64, sc *scratch) (hasBulk bool, err error) {
	temp := uint32(locals)
	code, open := sc.code[:0], sc.open[:0]
	ended := false
	var in instr
	for !r.done() {
		if ended {
			r.fail("code after the function's end")
			break
		}
		next(r, &in)
		if err := m.checkIndex(&in, locals); err != nil {
			return false, err
		}
		if in.bulk() {
			hasBulk = true
			code = m.bulkCharge(code, temp)
			m.stats.Bulk++
		}
		code = m.copyInstr(code, b, &in)
		switch in.op {
		case opBlock, opIf:
			open = append(open, block{patch: -1})
		case opLoop:
			var at int
			code, at = m.chargeLater(code)
			open = append(open, block{patch: at, start: in.end})
			m.stats.Loops++
		case opEnd:
			if len(open) == 0 {
				ended = true
				break
			}
			if top := open[len(open)-1]; top.patch >= 0 {
				putPadded(code[top.patch:], cost(in.start-top.start))
			}
			open = open[:len(open)-1]
		}
	}
	sc.code, sc.open = code, open
	if r.err != nil {
		return false, r.err
	}
	if !ended {
		return false, errors.New("the body does not end")
	}
	return hasBulk, nil
}

// checkIndex refuses a local, global, type or element segment index the
// original module does not have, so that the function is exactly as valid
// metered as it was before: the fuel global, the tick function's type, the
// bulk charge's local and the wrappers' declarative segment exist only in
// the metered module, and code that could name the fuel global could refill
// it and never tick.
func (m *module) checkIndex(in *instr, locals uint64) error {
	var n uint64
	switch in.kind() {
	case immLocal:
		n = locals
	case immGlobal:
		n = uint64(m.globals)
	case immType:
		n = uint64(len(m.types))
	case immElem:
		n = uint64(m.elements)
	default:
		return nil
	}
	if uint64(in.idx) >= n {
		return fmt.Errorf("offset %d: instruction %#x: index %d out of range", in.start, in.op, in.idx)
	}
	return nil
}

// cost is the fuel a charge point covering n bytes of code costs.
func cost(n int) int32 { return int32(1 + n/costUnitBytes) }

// chargeLater appends a charge whose cost is a five-byte placeholder, and
// returns where the placeholder is.
func (m *module) chargeLater(out []byte) ([]byte, int) {
	out = append(out, opGlobalGet)
	out = appendU32(out, m.fuelGlobal)
	out = append(out, opI32Const)
	at := len(out)
	out = append(out, 0x80, 0x80, 0x80, 0x80, 0x00)
	out = append(out, opI32Sub, opGlobalSet)
	out = appendU32(out, m.fuelGlobal)
	return append(out, m.chargeSuffix...), at
}

// putPadded writes v ≥ 0 as a signed LEB128 of exactly five bytes.
func putPadded(b []byte, v int32) {
	u := uint32(v)
	b[0] = byte(u&0x7f) | 0x80
	b[1] = byte(u>>7&0x7f) | 0x80
	b[2] = byte(u>>14&0x7f) | 0x80
	b[3] = byte(u>>21&0x7f) | 0x80
	b[4] = byte(u >> 28 & 0x07)
}

// charge appends the charge for covering n bytes of code:
//
//	global.get $fuel; i32.const cost; i32.sub; global.set $fuel; check
func (m *module) charge(out []byte, n int) []byte {
	out = append(out, opGlobalGet)
	out = appendU32(out, m.fuelGlobal)
	out = append(out, opI32Const)
	out = appendS32(out, cost(n))
	out = append(out, opI32Sub, opGlobalSet)
	out = appendU32(out, m.fuelGlobal)
	return append(out, m.chargeSuffix...)
}

// bulkCharge appends, before a bulk operation whose count n is on top of the
// stack, the charge n>>bulkShift:
//
//	local.set $t; global.get $fuel; local.get $t; i32.const bulkShift; i32.shr_u;
//	i32.sub; global.set $fuel; check; local.get $t
func (m *module) bulkCharge(out []byte, temp uint32) []byte {
	out = append(out, opLocalSet)
	out = appendU32(out, temp)
	out = append(out, opGlobalGet)
	out = appendU32(out, m.fuelGlobal)
	out = append(out, opLocalGet)
	out = appendU32(out, temp)
	out = append(out, opI32Const, bulkShift, opI32ShrU, opI32Sub, opGlobalSet)
	out = appendU32(out, m.fuelGlobal)
	out = append(out, m.chargeSuffix...)
	out = append(out, opLocalGet)
	return appendU32(out, temp)
}

// check is the code after every subtraction: when the fuel is spent, call
// the host and refill.
//
//	global.get $fuel; i32.const 0; i32.le_s
//	if; call $tick; i32.const fuel; global.set $fuel; end
func (m *module) check(fuel uint32) []byte {
	out := []byte{opGlobalGet}
	out = appendU32(out, m.fuelGlobal)
	out = append(out, opI32Const, 0x00, opI32LeS, opIf, blockEmpty, opCall)
	out = appendU32(out, m.tickFunc)
	out = append(out, opI32Const)
	out = appendS32(out, int32(fuel))
	out = append(out, opGlobalSet)
	out = appendU32(out, m.fuelGlobal)
	return append(out, opEnd)
}
