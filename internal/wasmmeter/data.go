package wasmmeter

import (
	"cmp"
	"slices"
)

// A Go module's data section is its linker's: a segment for every run of
// non-zero bytes, split wherever 8 or more zero bytes follow, about 40,000
// segments for 1 MB of data in the first-party plugins. wazero keeps every
// segment of a compiled module as a struct in the Go heap (64 bytes each,
// with two pointers) and the bytes of each in an allocation of its own, for
// as long as the module is loaded, so every garbage collection of the host
// walks them all: 4 MB of the heap it scans per plugin, about 4 ms of a
// collection on one CPU of the benchmark host. Every instance copies them
// one by one.
//
// Instrument therefore writes such a data section back with its segments
// joined: segments next to each other in the section, each at a higher
// offset than the one before, are one segment when the zeros between them
// are at most maxDataGap bytes. A memory the module defines starts zeroed,
// so the joined segment writes what its parts wrote. It joins only when
// every segment is active, in memory 0, at an i32.const offset, no two
// segments that write overlap, and no bytes of another segment lie in a gap
// (so no zeros it writes land on them); and only when the module has no
// data count section (whose count, and the segment indices of memory.init
// and data.drop, would change) and imports no memory (whose bytes the zeros
// would overwrite). Otherwise the section is left as it was.

// maxDataGap is the longest run of zeros a joined segment carries between two
// of its parts: 64 bytes is what joins a Go module's segments into about a dozen
// (tokens.wasm: 40,751 into 12, with 0.7 MB of zeros between them).
const maxDataGap = 64

// dataSeg is an active segment of memory 0 at a constant offset.
type dataSeg struct {
	off  uint32
	init []byte
}

func (s dataSeg) end() uint64 { return uint64(s.off) + uint64(len(s.init)) }

// dataSection checks the data section body b and returns it with its
// segments joined where that is safe (see above), or b itself.
func (m *module) dataSection(b []byte) ([]byte, error) {
	if err := m.checkSection(secData, b); err != nil {
		return nil, err
	}
	segs, ok := constSegments(b)
	if !ok || len(segs) < 2 || m.memImport || slices.ContainsFunc(m.sections, func(s section) bool { return s.id == secDataCount }) {
		return b, nil
	}
	joined := joinSegments(segs)
	if len(joined) == len(segs) {
		return b, nil
	}
	m.stats.DataSegments, m.stats.DataSegmentsJoined = len(segs), len(joined)
	out := appendU32(nil, uint32(len(joined)))
	for _, s := range joined {
		out = append(out, 0, opI32Const)
		out = appendS32(out, int32(s.off))
		out = append(out, opEnd)
		out = appendU32(out, uint32(len(s.init)))
		out = append(out, s.init...)
	}
	return out, nil
}

// constSegments reads the segments of a checked data section, if every one
// is active in memory 0 at an i32.const offset written as an s32 (an offset
// whose last byte does not sign-extend is wazero's to refuse, not ours to
// rewrite into a valid one).
func constSegments(b []byte) ([]dataSeg, bool) {
	r := &reader{b: b}
	n := r.count(1)
	segs := make([]dataSeg, 0, n)
	for range n {
		if r.u32() != 0 || r.byte() != opI32Const {
			return nil, false
		}
		v := r.signed(32)
		if v != int64(int32(v)) || r.byte() != opEnd {
			return nil, false
		}
		off := uint32(v)
		segs = append(segs, dataSeg{off: off, init: r.bytes(int(r.u32()))})
	}
	return segs, r.err == nil
}

// joinSegments joins runs of segments (see maxDataGap), or returns segs
// unchanged when two of them overlap.
func joinSegments(segs []dataSeg) []dataSeg {
	// The segments that write, by offset: an empty one writes nothing.
	byOff := slices.DeleteFunc(slices.Clone(segs), func(s dataSeg) bool { return len(s.init) == 0 })
	slices.SortFunc(byOff, func(a, b dataSeg) int { return cmp.Compare(a.off, b.off) })
	for i := 1; i < len(byOff); i++ {
		if uint64(byOff[i].off) < byOff[i-1].end() {
			return segs
		}
	}
	var zeros [maxDataGap]byte
	out := []dataSeg{segs[0]}
	owned := false // whether out's last init is a copy, free to grow
	for _, s := range segs[1:] {
		last := &out[len(out)-1]
		if !joinable(byOff, *last, s) {
			out, owned = append(out, s), false
			continue
		}
		if !owned { // the first join: copy, never append to the module's bytes
			last.init, owned = slices.Clone(last.init), true
		}
		last.init = append(append(last.init, zeros[:uint64(s.off)-last.end()]...), s.init...)
	}
	return out
}

// joinable reports whether segment s, the next after last, can join it: it
// starts at most maxDataGap bytes after last ends, and no bytes of another
// segment lie in between. byOff is the segments that write, by offset, none
// overlapping another: one that touches the gap either starts in it or is
// the last to start before it and reaches into it (last may be empty, or
// begin with an empty segment, inside it).
func joinable(byOff []dataSeg, last, s dataSeg) bool {
	if uint64(s.off) < last.end() || uint64(s.off)-last.end() > maxDataGap {
		return false
	}
	i, _ := slices.BinarySearchFunc(byOff, last.end(), func(a dataSeg, t uint64) int { return cmp.Compare(uint64(a.off), t) })
	if i > 0 && byOff[i-1].end() > last.end() {
		return false
	}
	return i == len(byOff) || byOff[i].off >= s.off
}
