// Package wasmmeter makes a WebAssembly module stoppable at a cost of about
// a nanosecond per loop iteration and function call, instead of wazero's
// WithCloseOnContextDone, which leaves compiled code for Go at every loop
// header (tens of nanoseconds each, and a Go guest has one in every
// function).
//
// Instrument adds a fuel counter (a mutable i32 global) and an imported host
// function, ImportModule.ImportName. Every function entry and every loop
// header subtracts a cost from the counter; a bulk memory or table operation
// subtracts one unit per KiB (or per 1,024 elements) it is asked to move.
// When the counter reaches zero the guest calls the host function and the
// counter is refilled. The host function is where the embedder stops a guest
// that has run too long (by panicking, which wazero turns into an error from
// the call), and a call into Go is also where the Go scheduler and garbage
// collector can reach the goroutine running the guest.
//
// Every infinite execution must branch backwards (a loop header) or call
// (a function entry) without end, so it calls the host function again and
// again. Between two calls of the host function the guest runs at most about
// Fuel units: with a unit of at most costUnitBytes bytes of straight-line
// code, or 1 KiB moved by one bulk operation, that is a fraction of a
// millisecond of guest time for the default fuel.
package wasmmeter

import (
	"bytes"
	"errors"
	"fmt"
	"math"
)

// The host function a metered module imports: no parameters, no results.
const (
	ImportModule = "modelrelay_meter"
	ImportName   = "tick"
)

// DefaultFuel is the fuel between two calls of the host function.
const DefaultFuel = 10_000

// costUnitBytes: a charge point costs 1 unit plus 1 per costUnitBytes bytes of
// the code it covers (the function's body at entry, the loop's body at its
// header), so that a long stretch of straight-line code costs in proportion.
// bulkShift: a bulk operation costs n>>bulkShift units for a count n.
const (
	costUnitBytes = 256
	bulkShift     = 10
)

// Stats counts what Instrument metered.
type Stats struct {
	Functions int // function bodies, each charged at entry
	Loops     int // loop headers
	Bulk      int // bulk memory and table operations
}

var errModule = errors.New("wasmmeter")

// Instrument returns a copy of the module wasm with fuel metering, and what
// it metered. fuel is the fuel between two calls of the host function
// (0 means DefaultFuel). The module is not validated here beyond what
// rewriting it needs (wazero validates the result when it compiles it), but
// every byte of code is decoded, and a module using an instruction or
// section outside WebAssembly 2.0 is refused.
//
// Every length a module declares is checked against the bytes that follow
// it (and a function may declare at most maxLocals locals). That is also a
// shield for wazero: its decoder allocates whatever a module declares (a
// vector of 2³² imports, a name of 4 GiB) before it reads a byte of it, so
// a file of a few bytes could make the process die out of memory. A module
// Instrument accepts cannot.
func Instrument(wasm []byte, fuel uint32) ([]byte, Stats, error) {
	if fuel == 0 {
		fuel = DefaultFuel
	}
	if fuel > math.MaxInt32 {
		return nil, Stats{}, fmt.Errorf("%w: fuel %d exceeds %d", errModule, fuel, math.MaxInt32)
	}
	m, err := parse(wasm)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("%w: %w", errModule, err)
	}
	out, err := m.rewrite(fuel)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("%w: %w", errModule, err)
	}
	return out, m.stats, nil
}

var header = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// Section ids, and their required order (custom sections aside).
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

var sectionRank = map[byte]int{
	secType: 1, secImport: 2, secFunction: 3, secTable: 4, secMemory: 5, secGlobal: 6,
	secExport: 7, secStart: 8, secElement: 9, secDataCount: 10, secCode: 11, secData: 12,
}

type section struct {
	id   byte
	body []byte
}

// module is what rewriting needs to know of a module.
type module struct {
	sections []section

	types        []int    // parameter count of each type
	funcImports  uint32   // imported functions: they keep their indices
	globals      uint32   // imported and defined globals: the fuel global comes after
	funcTypes    []uint32 // type of each defined function
	stats        Stats
	fuelGlobal   uint32
	tickFunc     uint32
	tickType     uint32
	chargeSuffix []byte // the check after a subtraction (see check)
}

func parse(wasm []byte) (*module, error) {
	if len(wasm) < len(header) || !bytes.Equal(wasm[:len(header)], header) {
		return nil, errors.New("not a WebAssembly 1.0 binary (bad magic or version)")
	}
	m := &module{}
	r := &reader{b: wasm, off: len(header)}
	lastRank := 0
	for !r.done() {
		id := r.byte()
		body := r.bytes(int(r.u32()))
		if r.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, r.err)
		}
		if id != secCustom {
			rank, ok := sectionRank[id]
			switch {
			case id == secTag:
				return nil, errors.New("exception handling (tag section) is not supported")
			case !ok:
				return nil, fmt.Errorf("unknown section id %d", id)
			case rank <= lastRank:
				return nil, fmt.Errorf("section %d out of order or repeated", id)
			}
			lastRank = rank
		}
		m.sections = append(m.sections, section{id, body})
	}
	if r.err != nil {
		return nil, r.err
	}
	for _, s := range m.sections {
		var err error
		switch s.id {
		case secType:
			err = m.readTypes(s.body)
		case secImport:
			err = m.readImports(s.body)
		case secFunction:
			err = m.readFunctions(s.body)
		case secGlobal:
			r := &reader{b: s.body}
			m.globals += uint32(r.count(3))
			err = r.err
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", s.id, err)
		}
	}
	if uint64(m.globals) >= math.MaxUint32 || uint64(len(m.types)) >= math.MaxUint32 {
		return nil, errors.New("too many globals or types")
	}
	return m, nil
}

func (m *module) readTypes(b []byte) error {
	r := &reader{b: b}
	n := r.count(3)
	m.types = make([]int, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		if form := r.byte(); form != 0x60 {
			r.fail("type %d: form %#x is not a function type", i, form)
		}
		params := r.count(1)
		for j := 0; j < params && r.err == nil; j++ {
			if c := r.byte(); !isValType(c) {
				r.fail("type %d: unknown value type %#x", i, c)
			}
		}
		results := r.count(1)
		for j := 0; j < results && r.err == nil; j++ {
			if c := r.byte(); !isValType(c) {
				r.fail("type %d: unknown value type %#x", i, c)
			}
		}
		m.types = append(m.types, params)
	}
	return endOf(r)
}

func (m *module) readImports(b []byte) error {
	r := &reader{b: b}
	n := r.count(4)
	for i := 0; i < n && r.err == nil; i++ {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0x00:
			r.u32()
			m.funcImports++
		case 0x01:
			if c := r.byte(); c != 0x70 && c != 0x6f {
				r.fail("import %d: unknown reference type %#x", i, c)
			}
			limits(r)
		case 0x02:
			limits(r)
		case 0x03:
			if c := r.byte(); !isValType(c) {
				r.fail("import %d: unknown value type %#x", i, c)
			}
			r.byte()
			m.globals++
		default:
			r.fail("import %d: unsupported kind %#x", i, kind)
		}
	}
	return endOf(r)
}

func limits(r *reader) {
	switch flags := r.byte(); flags {
	case 0x00, 0x02:
		r.u32()
	case 0x01, 0x03:
		r.u32()
		r.u32()
	default:
		r.fail("unsupported limits flags %#x", flags)
	}
}

func (m *module) readFunctions(b []byte) error {
	r := &reader{b: b}
	n := r.count(1)
	m.funcTypes = make([]uint32, n)
	for i := range m.funcTypes {
		m.funcTypes[i] = r.u32()
	}
	return endOf(r)
}

// endOf is r's error, or an error if bytes are left.
func endOf(r *reader) error {
	if r.err == nil && r.off != len(r.b) {
		r.fail("%d bytes after the last entry", len(r.b)-r.off)
	}
	return r.err
}

// fn is the index of function i once the tick import is added: imported
// functions keep theirs, defined ones move up by one.
func (m *module) fn(i uint32) uint32 {
	if i < m.funcImports || i == math.MaxUint32 {
		return i // an index of 2³²−1 is invalid either way: wazero refuses it
	}
	return i + 1
}

// rewrite assembles the metered module: every section in its place, with
// the type, import and global sections (created when missing) extended.
func (m *module) rewrite(fuel uint32) ([]byte, error) {
	m.tickType = uint32(len(m.types))
	m.tickFunc = m.funcImports
	m.fuelGlobal = m.globals
	m.chargeSuffix = m.check(fuel)

	out := append(make([]byte, 0, len(m.sections)*8+sizeOf(m.sections)*5/4), header...)
	added := map[byte]bool{}
	// ensure emits, before a section of rank next, each section the metered
	// module needs that the original lacks.
	ensure := func(next int) {
		for _, id := range []byte{secType, secImport, secGlobal} {
			if !added[id] && sectionRank[id] < next {
				added[id] = true
				out = appendSection(out, id, m.extend(id, nil, fuel))
			}
		}
	}
	for _, s := range m.sections {
		if s.id == secCustom {
			body, err := m.custom(s.body)
			if err != nil {
				return nil, fmt.Errorf("custom section: %w", err)
			}
			out = appendSection(out, secCustom, body)
			continue
		}
		ensure(sectionRank[s.id])
		var body []byte
		var err error
		switch s.id {
		case secType, secImport:
			added[s.id] = true
			body = m.extend(s.id, s.body, fuel)
		case secGlobal:
			added[s.id] = true
			body, err = m.globalSection(s.body, fuel)
		case secExport:
			body, err = m.exportSection(s.body)
		case secStart:
			r := &reader{b: s.body}
			body = appendU32(nil, m.fn(r.u32()))
			err = endOf(r)
		case secElement:
			body, err = m.elementSection(s.body)
		case secCode:
			body, err = m.codeSection(s.body)
		case secTable, secMemory, secData:
			body, err = s.body, checkSection(s.id, s.body)
		default:
			body = s.body
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", s.id, err)
		}
		out = appendSection(out, s.id, body)
	}
	ensure(math.MaxInt)
	if len(m.funcTypes) > 0 && m.stats.Functions != len(m.funcTypes) {
		return nil, fmt.Errorf("%d functions declared, %d bodies", len(m.funcTypes), m.stats.Functions)
	}
	return out, nil
}

func sizeOf(ss []section) int {
	n := 0
	for _, s := range ss {
		n += len(s.body)
	}
	return n
}

func appendSection(out []byte, id byte, body []byte) []byte {
	out = append(out, id)
	out = appendU32(out, uint32(len(body)))
	return append(out, body...)
}

// extend returns the type or import section body (nil: the module has none)
// with the tick function's type or import appended. The global section is
// rewritten by globalSection; for a module without one, extend makes one
// holding just the fuel global.
func (m *module) extend(id byte, body []byte, fuel uint32) []byte {
	var n uint32
	var rest []byte
	if body != nil {
		r := &reader{b: body}
		n = r.u32()
		rest = body[r.off:]
	}
	out := appendU32(nil, n+1)
	out = append(out, rest...)
	switch id {
	case secType:
		out = append(out, 0x60, 0x00, 0x00)
	case secImport:
		out = appendName(out, ImportModule)
		out = appendName(out, ImportName)
		out = append(out, 0x00)
		out = appendU32(out, m.tickType)
	case secGlobal:
		out = appendFuelGlobal(out, fuel)
	}
	return out
}

func appendFuelGlobal(out []byte, fuel uint32) []byte {
	out = append(out, typeI32, 0x01, opI32Const)
	out = appendS32(out, int32(fuel))
	return append(out, opEnd)
}

// globalSection renumbers ref.func in the initialisers and appends the fuel
// global.
func (m *module) globalSection(body []byte, fuel uint32) ([]byte, error) {
	r := &reader{b: body}
	n := r.count(3)
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
	return appendFuelGlobal(out, fuel), nil
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
		if kind == 0x00 {
			idx = m.fn(idx)
		}
		out = appendU32(out, idx)
	}
	return out, endOf(r)
}

// elementSection renumbers the function indices and ref.func expressions of
// every element segment, in each of the eight encodings.
func (m *module) elementSection(body []byte) ([]byte, error) {
	r := &reader{b: body}
	n := r.count(2)
	out := appendU32(nil, uint32(n))
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
	return out, endOf(r)
}

// constExpr copies a constant expression through its end, renumbering
// ref.func.
func (m *module) constExpr(r *reader, out []byte) []byte {
	var in instr
	for r.err == nil {
		next(r, &in)
		if r.err != nil {
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
		return appendU32(out, m.fn(in.fn))
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
		out = appendU32(out, m.fn(r.u32()))
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

// checkSection reads a table, memory or data section, which the meter does
// not change, for the lengths it declares: see Instrument on why every
// length is checked.
func checkSection(id byte, b []byte) error {
	r := &reader{b: b}
	n := r.count(1)
	for i := 0; i < n && r.err == nil; i++ {
		switch id {
		case secTable:
			if c := r.byte(); c != 0x70 && c != 0x6f {
				r.fail("table %d: unknown reference type %#x", i, c)
			}
			limits(r)
		case secMemory:
			limits(r)
		case secData:
			switch flags := r.u32(); flags {
			case 0:
				constExpr(r)
			case 1:
			case 2:
				r.u32()
				constExpr(r)
			default:
				r.fail("data segment %d: flags %d", i, flags)
			}
			r.bytes(int(r.u32()))
		}
	}
	if err := endOf(r); err != nil {
		return fmt.Errorf("section %d: %w", id, err)
	}
	return nil
}

// constExpr skips a constant expression.
func constExpr(r *reader) {
	var in instr
	for r.err == nil {
		if next(r, &in); in.op == opEnd {
			return
		}
	}
}
