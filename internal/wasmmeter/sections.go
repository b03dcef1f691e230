package wasmmeter

import (
	"fmt"
)

// typeSection appends the tick function's type, () → ().
func (m *module) typeSection(body []byte) []byte {
	n, rest := vector(body)
	out := append(appendU32(nil, n+1), rest...)
	return append(out, 0x60, 0x00, 0x00)
}

// importSection appends the tick import, after every original import, so
// that imported functions keep their indices.
func (m *module) importSection(body []byte) []byte {
	n, rest := vector(body)
	out := append(appendU32(nil, n+1), rest...)
	out = appendName(out, ImportModule)
	out = appendName(out, ImportName)
	out = append(out, 0x00)
	return appendU32(out, m.tickType)
}

// functionSection appends the wrappers' types.
func (m *module) functionSection(body []byte) []byte {
	n, rest := vector(body)
	out := append(appendU32(nil, n+uint32(len(m.importTypes))), rest...)
	for _, t := range m.importTypes {
		out = appendU32(out, t)
	}
	return out
}

// wrapper is the body of the function that stands for imported function i
// wherever the module's code or tables refer to it: it spends all the fuel
// left (so the host checks the deadline before every call into it) and
// calls it. A host function can take long on its own (a WASI random_get of
// 64 MiB takes longer than a call's deadline), so one call of it is all a
// guest may run past its deadline, as under wazero's own guard.
//
//	i32.const 0; global.set $fuel; check; local.get 0 … local.get n-1; call i
func (m *module) wrapper(out []byte, i uint32) []byte {
	code := []byte{0x00, opI32Const, 0x00, opGlobalSet} // no locals
	code = appendU32(code, m.fuelGlobal)
	code = append(code, m.chargeSuffix...)
	for p := range len(m.types[m.importTypes[i]].Params) {
		code = append(code, opLocalGet)
		code = appendU32(code, uint32(p))
	}
	code = append(code, opCall)
	code = appendU32(code, i)
	code = append(code, opEnd)
	out = appendU32(out, uint32(len(code)))
	return append(out, code...)
}

// tableSection caps the tables at MaxTableSize elements together: a
// table's memory is outside MemoryLimitPages, wazero allocates a table's
// minimum at instantiation and grows one without a maximum without limit,
// and a module may declare many tables. Each table gets as maximum the
// least of its own and what is left of the budget (growing past it fails,
// as the specification allows); a table whose minimum does not fit is
// refused.
func (m *module) tableSection(body []byte) ([]byte, error) {
	r := &reader{b: body}
	n := r.count(2)
	out := appendU32(nil, uint32(n))
	for i := 0; i < n && r.err == nil; i++ {
		c := r.byte()
		if c != 0x70 && c != 0x6f {
			r.fail("table %d: unknown reference type %#x", i, c)
		}
		lo, hi, hasMax := limits(r)
		left := uint32(MaxTableSize - min(m.tableElems, MaxTableSize))
		if !hasMax || hi > left {
			hi = left
		}
		if r.err == nil && lo > hi {
			r.fail("table %d: %d elements, beyond the %d all tables may have", i, lo, MaxTableSize)
		}
		m.tableElems += uint64(hi)
		out = append(out, c, 0x01)
		out = appendU32(out, lo)
		out = appendU32(out, hi)
	}
	return out, endOf(r)
}

// MaxTableSize is the most elements all of a module's tables may have
// together (8 MiB of references; a Go module's one table has an element per
// function whose address it takes, a few thousand).
const MaxTableSize = 1 << 20

// globalSection checks and renumbers the initialisers and appends the fuel
// global.
func (m *module) globalSection(body []byte, fuel uint32) ([]byte, error) {
	r := &reader{b: body}
	var n int
	if body != nil {
		n = r.count(3)
	}
	out := appendU32(nil, uint32(n+1))
	for i := 0; i < n && r.err == nil; i++ {
		start := r.off
		if c := r.byte(); !isValType(c) {
			r.fail("global %d: unknown value type %#x", i, c)
		}
		r.byte() // mutability
		out = append(out, body[start:r.off]...)
		out = m.constExpr(r, out)
	}
	if err := endOf(r); err != nil {
		return nil, err
	}
	out = append(out, typeI32, 0x01, opI32Const)
	out = appendS32(out, int32(fuel))
	return append(out, opEnd), nil
}

func (m *module) exportSection(body []byte) ([]byte, error) {
	r := &reader{b: body}
	n := r.count(3)
	out := appendU32(nil, uint32(n))
	for i := 0; i < n && r.err == nil; i++ {
		start := r.off
		r.name()
		kind := r.byte()
		out = append(out, body[start:r.off]...)
		idx := r.u32()
		switch kind {
		case 0x00:
			idx = m.fnDirect(idx)
		case 0x03:
			if r.err == nil && idx >= m.globals {
				r.fail("export %d: global index %d out of range", i, idx)
			}
		}
		out = appendU32(out, idx)
	}
	return out, endOf(r)
}

// elementSection renumbers the function indices and ref.func expressions of
// every element segment, in each of the eight encodings, and appends a
// declarative segment of the wrappers, which a ref.func in code may now
// name.
func (m *module) elementSection(body []byte) ([]byte, error) {
	r := &reader{b: body}
	var n int
	if body != nil {
		n = r.count(2)
	}
	total := n
	if m.funcImports > 0 {
		total++
	}
	out := appendU32(nil, uint32(total))
	for i := 0; i < n && r.err == nil; i++ {
		flags := r.u32()
		if flags > 7 {
			r.fail("element segment %d: flags %d", i, flags)
			break
		}
		out = appendU32(out, flags)
		if flags == 2 || flags == 6 { // table index
			out = appendU32(out, r.u32())
		}
		if flags&1 == 0 { // active: offset expression
			out = m.constExpr(r, out)
		}
		if flags&3 != 0 { // element kind or reference type
			out = append(out, r.byte())
		}
		items := r.count(1)
		out = appendU32(out, uint32(items))
		for j := 0; j < items && r.err == nil; j++ {
			if flags&4 == 0 {
				out = appendU32(out, m.fn(r.u32()))
			} else {
				out = m.constExpr(r, out)
			}
		}
	}
	if err := endOf(r); err != nil {
		return nil, err
	}
	if m.funcImports > 0 {
		out = append(out, 0x03, 0x00) // declarative, function indices
		out = appendU32(out, m.funcImports)
		for i := range m.funcImports {
			out = appendU32(out, m.fn(i))
		}
	}
	return out, nil
}

// constExpr copies a constant expression through its end, renumbering
// ref.func and refusing a global.get of the fuel global.
func (m *module) constExpr(r *reader, out []byte) []byte {
	var in instr
	for r.err == nil {
		next(r, &in)
		if r.err != nil {
			break
		}
		if in.op == opGlobalGet && in.idx >= m.globals {
			r.fail("global index %d out of range", in.idx)
			break
		}
		out = m.copyInstr(out, r.b, &in)
		if in.op == opEnd {
			return out
		}
	}
	return out
}

// copyInstr appends in, renumbered if it names a function.
func (m *module) copyInstr(out, code []byte, in *instr) []byte {
	if in.callsFunc() {
		out = append(out, in.op)
		return appendU32(out, m.fn(in.idx))
	}
	return append(out, code[in.start:in.end]...)
}

// custom returns a custom section's body as it must be in the metered
// module: the name section with its function indices renumbered, any other
// as it is.
func (m *module) custom(body []byte) ([]byte, error) {
	r := &reader{b: body}
	if n := r.name(); r.err != nil || n != "name" {
		return body, r.err
	}
	out := append([]byte(nil), body[:r.off]...)
	for !r.done() {
		id := r.byte()
		sub := r.bytes(int(r.u32()))
		if r.err != nil {
			return nil, r.err
		}
		var err error
		switch id {
		case 0: // module name
			sr := &reader{b: sub}
			sr.name()
			err = endOf(sr)
		case 1, 2, 3: // function, local and label names: keyed by function index
			sub, err = m.renumberNameMap(sub, id != 1)
		}
		if err != nil {
			return nil, fmt.Errorf("name section: subsection %d: %w", id, err)
		}
		out = append(out, id)
		out = appendU32(out, uint32(len(sub)))
		out = append(out, sub...)
	}
	return out, nil
}

// renumberNameMap renumbers the function indices of a name map (nested: an
// indirect name map, whose values are name maps).
func (m *module) renumberNameMap(b []byte, nested bool) ([]byte, error) {
	r := &reader{b: b}
	n := r.count(2)
	out := appendU32(nil, uint32(n))
	for i := 0; i < n && r.err == nil; i++ {
		idx := r.u32()
		if idx < m.funcsEnd { // a name for a function that does not exist stays as harmless as it was
			idx = m.fnDirect(idx)
		}
		out = appendU32(out, idx)
		start := r.off
		if nested {
			inner := r.count(2)
			for j := 0; j < inner && r.err == nil; j++ {
				r.u32()
				r.name()
			}
		} else {
			r.name()
		}
		out = append(out, b[start:r.off]...)
	}
	return out, endOf(r)
}

// checkSection reads a memory or data section, which the meter does not
// change, for the lengths it declares (see Instrument on why every length
// is checked) and the globals it names.
func (m *module) checkSection(id byte, b []byte) error {
	r := &reader{b: b}
	n := r.count(1)
	for i := 0; i < n && r.err == nil; i++ {
		switch id {
		case secMemory:
			limits(r)
		case secData:
			switch flags := r.u32(); flags {
			case 0:
				m.constExpr(r, nil)
			case 1:
			case 2:
				r.u32()
				m.constExpr(r, nil)
			default:
				r.fail("data segment %d: flags %d", i, flags)
			}
			r.bytes(int(r.u32()))
		}
	}
	return endOf(r)
}
