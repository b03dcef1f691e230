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

	// DataSegments is the data segments of a module whose segments were
	// joined (data.go), DataSegmentsJoined how many they became; 0 and 0
	// when none were.
	DataSegments, DataSegmentsJoined int
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

	types        []FuncType // each function type, its value types as encoded
	funcImports  uint32     // imported functions: they keep their indices
	memImport    bool       // the module imports a memory: it need not start zeroed
	importTypes  []uint32   // type of each imported function
	funcsEnd     uint32     // imported and defined functions
	elements     uint32     // element segments: the wrappers' declaration comes after
	tableElems   uint64     // the most elements the tables declared so far may hold
	badFunc      error      // a function index out of range, met while rewriting
	globals      uint32     // imported and defined globals: the fuel global comes after
	funcTypes    []uint32   // type of each defined function
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
		case secElement:
			r := &reader{b: s.body}
			m.elements = uint32(r.count(2))
			err = r.err
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", s.id, err)
		}
	}
	if uint64(m.globals) >= math.MaxUint32 || uint64(len(m.types)) >= math.MaxUint32 ||
		uint64(m.funcImports)+2*uint64(len(m.funcTypes)) >= math.MaxUint32 {
		return nil, errors.New("too many globals, types or functions")
	}
	m.funcsEnd = m.funcImports + uint32(len(m.funcTypes))
	return m, nil
}

func (m *module) readTypes(b []byte) error {
	r := &reader{b: b}
	n := r.count(3)
	m.types = make([]FuncType, 0, n)
	valTypes := func(i int) []byte {
		vs := r.bytes(r.count(1))
		for _, c := range vs {
			if r.err == nil && !isValType(c) {
				r.fail("type %d: unknown value type %#x", i, c)
			}
		}
		return vs
	}
	for i := 0; i < n && r.err == nil; i++ {
		if form := r.byte(); form != 0x60 {
			r.fail("type %d: form %#x is not a function type", i, form)
		}
		params := valTypes(i)
		m.types = append(m.types, FuncType{Params: params, Results: valTypes(i)})
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
			typ := r.u32()
			if r.err == nil && uint64(typ) >= uint64(len(m.types)) {
				r.fail("import %d: type index %d out of range", i, typ)
			}
			m.importTypes = append(m.importTypes, typ)
			m.funcImports++
		case 0x01:
			if c := r.byte(); c != 0x70 && c != 0x6f {
				r.fail("import %d: unknown reference type %#x", i, c)
			}
			_, max, hasMax := limits(r)
			if m.tableElems += uint64(max); !hasMax || m.tableElems > MaxTableSize {
				r.fail("import %d: a table without a maximum, or beyond the %d elements all tables may have", i, MaxTableSize)
			}
		case 0x02:
			limits(r)
			m.memImport = true
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

// limits reads the limits of a table or memory.
func limits(r *reader) (min, max uint32, hasMax bool) {
	switch flags := r.byte(); flags {
	case 0x00, 0x02:
		min = r.u32()
	case 0x01, 0x03:
		min, max, hasMax = r.u32(), r.u32(), true
	default:
		r.fail("unsupported limits flags %#x", flags)
	}
	return
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

// fn is the index a reference to function i (a call, return_call or
// ref.func in code, an element, a global's initialiser) becomes: a defined
// function moves up by one, past the tick import; an imported one is
// replaced by its wrapper (see wrapper).
func (m *module) fn(i uint32) uint32 {
	if i < m.funcImports {
		return m.funcsEnd + 1 + i
	}
	return m.fnDirect(i)
}

// fnDirect is the index function i has in the metered module: imported
// functions keep theirs, defined ones move up by one. Exports, the start
// function and the name section use it. An index out of range is an error
// (the metered module has functions the original lacks: it could name one).
func (m *module) fnDirect(i uint32) uint32 {
	switch {
	case i < m.funcImports:
		return i
	case i >= m.funcsEnd:
		if m.badFunc == nil {
			m.badFunc = fmt.Errorf("function index %d out of range", i)
		}
		return i
	}
	return i + 1
}

// rewrite assembles the metered module: every section in its place, with
// the type, import and global sections (created when missing) extended, and,
// when the module imports functions, the function, element and code
// sections extended with the wrappers.
func (m *module) rewrite(fuel uint32) ([]byte, error) {
	m.tickType = uint32(len(m.types))
	m.tickFunc = m.funcImports
	m.fuelGlobal = m.globals
	m.chargeSuffix = m.check(fuel)

	needed := []byte{secType, secImport, secGlobal} // in section order
	if m.funcImports > 0 {
		needed = []byte{secType, secImport, secFunction, secGlobal, secElement, secCode}
	}
	out := append(make([]byte, 0, len(m.sections)*8+sizeOf(m.sections)*5/4), header...)
	added := map[byte]bool{}
	// ensure emits, before a section of rank next, each section the metered
	// module needs that the original lacks.
	ensure := func(next int) error {
		for _, id := range needed {
			if !added[id] && sectionRank[id] < next {
				if err := m.section(&out, id, nil, fuel, added); err != nil {
					return err
				}
			}
		}
		return nil
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
		if err := ensure(sectionRank[s.id]); err != nil {
			return nil, err
		}
		if err := m.section(&out, s.id, s.body, fuel, added); err != nil {
			return nil, err
		}
	}
	if err := ensure(math.MaxInt); err != nil {
		return nil, err
	}
	if m.stats.Functions != len(m.funcTypes) {
		return nil, fmt.Errorf("%d functions declared, %d bodies", len(m.funcTypes), m.stats.Functions)
	}
	if m.badFunc != nil {
		return nil, m.badFunc
	}
	return out, nil
}

// section appends section id, rewritten, to *out; body is nil for one the
// original lacks.
func (m *module) section(out *[]byte, id byte, body []byte, fuel uint32, added map[byte]bool) error {
	added[id] = true
	var err error
	switch id {
	case secType:
		body = m.typeSection(body)
	case secImport:
		body = m.importSection(body)
	case secFunction:
		body = m.functionSection(body)
	case secTable:
		body, err = m.tableSection(body)
	case secGlobal:
		body, err = m.globalSection(body, fuel)
	case secExport:
		body, err = m.exportSection(body)
	case secStart:
		r := &reader{b: body}
		body = appendU32(nil, m.fnDirect(r.u32()))
		err = endOf(r)
	case secElement:
		body, err = m.elementSection(body)
	case secCode:
		body, err = m.codeSection(body)
	case secMemory:
		err = m.checkSection(id, body)
	case secData:
		body, err = m.dataSection(body)
	}
	if err != nil {
		return fmt.Errorf("section %d: %w", id, err)
	}
	*out = appendSection(*out, id, body)
	return nil
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

// vector splits a section body (nil: the module has none) into its count
// and the bytes after it.
func vector(body []byte) (uint32, []byte) {
	if body == nil {
		return 0, nil
	}
	r := &reader{b: body}
	n := r.u32()
	return n, body[r.off:]
}
