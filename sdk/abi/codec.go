package abi

import (
	"encoding/binary"
	"errors"
	"strconv"
)

// The binary encoding of the envelopes.
//
// Every value is written field by field in declaration order, with no tags and
// no reflection:
//
//   - int64: 8 bytes, little-endian two's complement;
//   - counts and string lengths: 4 bytes, little-endian unsigned;
//   - string: its byte length, then the bytes;
//   - bool: one byte, 0 or 1 (anything else is an error);
//   - list: its count, then the elements;
//   - an optional struct behind a Has* flag (Model.Reference,
//     Model.ReferenceSource): written only when the flag is set.
//
// Fixed widths rather than varints (ABI version 1 used varints): a guarded
// wasm guest pays a trip out to the host at every loop header it executes,
// and a varint is a loop per value, where a fixed-width read is a single
// load. Version 2 decodes a call's request in about half the time
// (RATIONALE-plugins.md); the few bytes more do not matter.
//
// Decode consumes the whole input: trailing bytes are an error, as are
// truncation, a bool other than 0 or 1, and a count
// larger than the remaining bytes could hold, which bounds what a decoder
// allocates by the size of its input. After a failed Decode the receiver holds
// a partly decoded value and must not be used.
//
// A result envelope is one status byte followed by the payload:
// 0 (ok) and the encoded result, or 1 (error) and an encoded *Error.

// Result envelope status bytes.
const (
	ResultOK    byte = 0
	ResultError byte = 1
)

// ErrTruncated is wrapped by a decode error when the input ends early.
var ErrTruncated = errors.New("truncated")

// DecodeError is the error of every Decode method and of DecodeResult. Field
// names the value being read when decoding failed ("AdmitRequest.Params[2].Name").
type DecodeError struct {
	Field  string
	Offset int // byte offset into the input where the bad value starts
	Err    error
}

func (e *DecodeError) Error() string {
	return "abi: decode " + e.Field + " at byte " + strconv.Itoa(e.Offset) + ": " + e.Err.Error()
}

// Unwrap returns the underlying error (ErrTruncated or a description).
func (e *DecodeError) Unwrap() error { return e.Err }

var (
	errBadBool   = errors.New("bool is neither 0 nor 1")
	errTooMany   = errors.New("count exceeds the remaining input")
	errTrailing  = errors.New("trailing bytes after the value")
	errBadStatus = errors.New("unknown result status byte")
)

// ---- writing ----

func appendInt(b []byte, v int64) []byte { return binary.LittleEndian.AppendUint64(b, uint64(v)) }

func appendCount(b []byte, n int) []byte { return binary.LittleEndian.AppendUint32(b, uint32(n)) }

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendStrings(b []byte, list []string) []byte {
	b = appendCount(b, len(list))
	for _, s := range list {
		b = appendString(b, s)
	}
	return b
}

// ---- reading ----

// decoder reads values from b; the first failure sticks in err and every
// later read returns zero values, so callers check err once at the end.
//
// Field names are kept as a stack of constant frames and joined into a path
// only when decoding fails, so that a successful decode allocates nothing but
// the decoded strings and lists.
type decoder struct {
	b     []byte
	off   int
	err   error
	depth int
	stack [maxDepth]frame
	strs  *Strings // when not nil, strings equal to the last decode's are reused
	si    int      // the index in strs of the next string
}

// Strings remembers the strings a decode produced, by their position in the
// encoding, so that the next decode of the same type whose strings repeat
// (the endpoint, model and route of a plugin's calls nearly always do)
// reuses them instead of allocating. Allocation is the costliest thing a
// guarded wasm guest does (PLUGIN-FACTS.md; RATIONALE-plugins.md measures
// it), so the sdk keeps one Strings per operation in the guest.
//
// A Strings is not safe for concurrent use. The strings it returns are
// ordinary immutable strings, safe to keep.
type Strings struct{ s [8]string }

// frame is one step of the path to the value being decoded: a type or field
// name, with the list index when index >= 0.
type frame struct {
	name  string
	index int
}

const maxDepth = 8 // Description.Models[i].Routes[j].Price.Sizes[k] needs 5

func (d *decoder) reset(b []byte, typ string) {
	d.b, d.off, d.err, d.depth = b, 0, nil, 0
	d.push(typ, -1)
}

func (d *decoder) push(name string, index int) {
	if d.depth < maxDepth {
		d.stack[d.depth] = frame{name, index}
	}
	d.depth++
}

func (d *decoder) pop() { d.depth-- }

func (d *decoder) fail(field string, err error) {
	if d.err != nil {
		return
	}
	var path []byte
	for i := 0; i < d.depth && i < maxDepth; i++ {
		if i > 0 {
			path = append(path, '.')
		}
		path = append(path, d.stack[i].name...)
		if d.stack[i].index >= 0 {
			path = append(path, '[')
			path = strconv.AppendInt(path, int64(d.stack[i].index), 10)
			path = append(path, ']')
		}
	}
	if field != "" {
		path = append(path, '.')
		path = append(path, field...)
	}
	d.err = &DecodeError{Field: string(path), Offset: d.off, Err: err}
}

func (d *decoder) remaining() int { return len(d.b) - d.off }

// count32 reads a 4-byte count or length.
func (d *decoder) count32(field string) uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.off < 4 {
		d.fail(field, ErrTruncated)
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return uint64(v)
}

func (d *decoder) int(field string) int64 {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.off < 8 {
		d.fail(field, ErrTruncated)
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return int64(v)
}

func (d *decoder) bool(field string) bool {
	if d.err != nil {
		return false
	}
	if d.off >= len(d.b) {
		d.fail(field, ErrTruncated)
		return false
	}
	c := d.b[d.off]
	if c > 1 {
		d.fail(field, errBadBool)
		return false
	}
	d.off++
	return c == 1
}

func (d *decoder) string(field string) string {
	start := d.off
	n := d.count32(field)
	if d.err != nil {
		return ""
	}
	if n > uint64(d.remaining()) {
		d.off = start
		d.fail(field, ErrTruncated)
		return ""
	}
	if n == 0 {
		d.si++
		return ""
	}
	b := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	if d.strs == nil || d.si >= len(d.strs.s) {
		return string(b)
	}
	i := d.si
	d.si++
	if d.strs.s[i] == string(b) { // compared without allocating
		return d.strs.s[i]
	}
	s := string(b)
	d.strs.s[i] = s
	return s
}

// count reads a list length and checks that the remaining input can hold that
// many elements of at least minSize bytes each.
func (d *decoder) count(field string, minSize int) int {
	start := d.off
	n := d.count32(field)
	if d.err != nil {
		return 0
	}
	if n > uint64(d.remaining()/minSize) {
		d.off = start
		d.fail(field, errTooMany)
		return 0
	}
	return int(n)
}

func (d *decoder) strings(field string) []string {
	n := d.count(field, 4) // each string has at least its length
	if n == 0 {
		return nil
	}
	list := make([]string, n)
	for i := range list {
		d.push(field, i)
		list[i] = d.string("")
		d.pop()
		if d.err != nil {
			return nil
		}
	}
	return list
}

// finish reports trailing bytes and returns the sticky error.
func (d *decoder) finish() error {
	if d.err == nil && d.off != len(d.b) {
		d.fail("", errTrailing)
	}
	return d.err
}

func appendList[T any](b []byte, list []T, elem func(*T, []byte) []byte) []byte {
	b = appendCount(b, len(list))
	for i := range list {
		b = elem(&list[i], b)
	}
	return b
}

// decodeList reads a list whose elements are at least minSize bytes each,
// decoding each element with elem, a closure over the decoder at the call
// site: decodeList(d, "Params", minParam, func(p *Param) { p.decode(d) }).
//
// The decoder is captured by the closure rather than passed to elem: an
// argument of a call through a func value or a generic's dictionary is
// opaque to escape analysis, which would move the decoder to the heap, one
// more allocation of 288 B per decode (BenchmarkAdmitRequestRoundTrip: 3
// allocs and 40 B/op, against 4 and 328). Each call site names only its own
// element type, so a guest links only the decoders it uses.
func decodeList[T any](d *decoder, field string, minSize int, elem func(*T)) []T {
	n := d.count(field, minSize)
	if n == 0 {
		return nil
	}
	list := make([]T, n)
	for i := range list {
		d.push(field, i)
		elem(&list[i])
		d.pop()
		if d.err != nil {
			return nil
		}
	}
	return list
}

// Minimum encoded sizes of list elements, used to bound counts.
const (
	minParam      = 8  // two empty strings
	minTier       = 12 // empty name, zero price
	minRoutePrice = 65 // empty route + minimum Price (string, 5 ints, bool, 2 counts, int)
	minModel      = 42 // 3 strings, count, 2 ints, string, count, 2 flags
	minLine       = 29 // 2 strings, count, 2 ints, bool
	minStep       = 20 // string, 2 ints
)

// ---- result envelopes ----

// AppendOK appends the ok status byte to b; the caller appends the encoded
// result after it. AppendOK(nil) alone is the result of OpConfigure.
func AppendOK(b []byte) []byte { return append(b, ResultOK) }

// EncodeOK returns an ok result envelope carrying payload (an encoded result).
func EncodeOK(payload []byte) []byte {
	b := make([]byte, 0, 1+len(payload))
	b = append(b, ResultOK)
	return append(b, payload...)
}

// AppendError appends an error result envelope carrying e to b.
func AppendError(b []byte, e *Error) []byte {
	b = append(b, ResultError)
	return e.AppendTo(b)
}

// EncodeError returns an error result envelope carrying e.
func EncodeError(e *Error) []byte {
	return AppendError(make([]byte, 0, 4+len(e.Code)+len(e.Field)+len(e.Message)), e)
}

// DecodeResult splits a result envelope. On status ok it returns the payload
// (a sub-slice of b, to be decoded with the result type's Decode); on status
// error it returns the guest's *Error. decodeErr is set when b is not a
// well-formed envelope (empty, unknown status byte, malformed error); exactly
// one of the three is meaningful.
func DecodeResult(b []byte) (payload []byte, err *Error, decodeErr error) {
	if len(b) == 0 {
		return nil, nil, &DecodeError{Field: "Result.Status", Err: ErrTruncated}
	}
	switch b[0] {
	case ResultOK:
		return b[1:], nil, nil
	case ResultError:
		e := new(Error)
		var d decoder
		d.reset(b, "Result.Error")
		d.off = 1
		e.decode(&d)
		if ferr := d.finish(); ferr != nil {
			return nil, nil, ferr
		}
		return nil, e, nil
	default:
		return nil, nil, &DecodeError{Field: "Result.Status", Err: errBadStatus}
	}
}

// PackResult returns ptr<<32 | len, the value mr_call returns.
func PackResult(ptr, length uint32) uint64 { return uint64(ptr)<<32 | uint64(length) }

// UnpackResult splits the value mr_call returned into pointer and length.
func UnpackResult(v uint64) (ptr, length uint32) { return uint32(v >> 32), uint32(v) }
