package wasmmeter

import (
	"errors"
	"fmt"
)

// reader reads the WebAssembly binary format. Its methods record the first
// error and return zero values after it, so a parse reads straight through
// and checks err once.
type reader struct {
	b   []byte
	off int
	err error
}

var errTruncated = errors.New("unexpected end")

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("offset %d: %s", r.off, fmt.Sprintf(format, args...))
	}
}

func (r *reader) done() bool { return r.err != nil || r.off >= len(r.b) }

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail("%v", errTruncated)
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.fail("%v: %d bytes wanted, %d left", errTruncated, n, len(r.b)-r.off)
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

// skipLEB skips a LEB128 of at most max bytes without decoding it (its
// value is wazero's to check).
func (r *reader) skipLEB(max int) {
	if r.err != nil {
		return
	}
	if r.off < len(r.b) && r.b[r.off] < 0x80 { // one byte: nearly all of them
		r.off++
		return
	}
	for i := 0; i < max; i++ {
		if r.off >= len(r.b) {
			r.fail("%v", errTruncated)
			return
		}
		c := r.b[r.off]
		r.off++
		if c&0x80 == 0 {
			return
		}
	}
	r.fail("LEB128 longer than %d bytes", max)
}

// u32 reads an unsigned LEB128 of at most 32 bits.
func (r *reader) u32() uint32 {
	var v uint64
	for i := 0; ; i++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if i == 4 && c > 0x0f {
			r.fail("u32 LEB128 too long or out of range")
			return 0
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return uint32(v)
		}
	}
}

// signed skips a signed LEB128 of at most bits bits (33 for block types,
// 32 and 64 for constants) and returns its value when it fits an int64.
func (r *reader) signed(bits int) int64 {
	maxBytes := (bits + 6) / 7
	var v int64
	shift := 0
	for i := 0; ; i++ {
		if i == maxBytes {
			r.fail("s%d LEB128 too long", bits)
			return 0
		}
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift < 64 {
			v |= int64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
	}
}

// count reads a vector length and refuses one that cannot fit in what is
// left, at min bytes per element, so that a hostile length cannot make the
// parser allocate.
func (r *reader) count(min int) int {
	n := r.u32()
	if r.err == nil && uint64(n)*uint64(min) > uint64(len(r.b)-r.off) {
		r.fail("vector of %d elements exceeds the %d bytes left", n, len(r.b)-r.off)
		return 0
	}
	return int(n)
}

// name reads a length-prefixed UTF-8 name (not checked: wazero does).
func (r *reader) name() string { return string(r.bytes(int(r.u32()))) }

// appendU32 appends v as unsigned LEB128.
func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// appendS32 appends v as signed LEB128.
func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// appendName appends a length-prefixed name.
func appendName(b []byte, s string) []byte {
	return append(appendU32(b, uint32(len(s))), s...)
}
