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

// ---- Error ----

// AppendTo appends the encoding of e to b.
func (e *Error) AppendTo(b []byte) []byte {
	b = appendString(b, e.Code)
	b = appendString(b, e.Field)
	return appendString(b, e.Message)
}

// Decode replaces e with the value encoded in b.
func (e *Error) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Error")
	e.decode(&d)
	return d.finish()
}

func (e *Error) decode(d *decoder) {
	e.Code = d.string("Code")
	e.Field = d.string("Field")
	e.Message = d.string("Message")
}

// ---- Param ----

// AppendTo appends the encoding of p to b.
func (p *Param) AppendTo(b []byte) []byte {
	b = appendString(b, p.Name)
	return appendString(b, p.Value)
}

// Decode replaces p with the value encoded in b.
func (p *Param) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Param")
	p.decode(&d)
	return d.finish()
}

func (p *Param) decode(d *decoder) {
	p.Name = d.string("Name")
	p.Value = d.string("Value")
}

func appendParams(b []byte, list []Param) []byte { return appendList(b, list, (*Param).AppendTo) }

// ---- Tier ----

// AppendTo appends the encoding of t to b.
func (t *Tier) AppendTo(b []byte) []byte {
	b = appendString(b, t.Name)
	return appendInt(b, t.Price)
}

// Decode replaces t with the value encoded in b.
func (t *Tier) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Tier")
	t.decode(&d)
	return d.finish()
}

func (t *Tier) decode(d *decoder) {
	t.Name = d.string("Name")
	t.Price = d.int("Price")
}

// ---- Price ----

// AppendTo appends the encoding of p to b. The long-context prices are
// written only when HasLongContext is set.
func (p *Price) AppendTo(b []byte) []byte {
	b = appendString(b, p.Unit)
	b = appendInt(b, p.Input)
	b = appendInt(b, p.Output)
	b = appendInt(b, p.CacheRead)
	b = appendInt(b, p.CacheWrite)
	b = appendInt(b, p.CacheWrite1h)
	b = appendBool(b, p.HasLongContext)
	if p.HasLongContext {
		b = appendInt(b, p.LongContextMin)
		b = appendInt(b, p.LongContextInput)
		b = appendInt(b, p.LongContextOutput)
	}
	b = appendList(b, p.Sizes, (*Tier).AppendTo)
	b = appendList(b, p.Resolutions, (*Tier).AppendTo)
	return appendInt(b, p.UnitPrice)
}

// Decode replaces p with the value encoded in b.
func (p *Price) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Price")
	p.decode(&d)
	return d.finish()
}

func (p *Price) decode(d *decoder) {
	*p = Price{}
	p.Unit = d.string("Unit")
	p.Input = d.int("Input")
	p.Output = d.int("Output")
	p.CacheRead = d.int("CacheRead")
	p.CacheWrite = d.int("CacheWrite")
	p.CacheWrite1h = d.int("CacheWrite1h")
	p.HasLongContext = d.bool("HasLongContext")
	if p.HasLongContext {
		p.LongContextMin = d.int("LongContextMin")
		p.LongContextInput = d.int("LongContextInput")
		p.LongContextOutput = d.int("LongContextOutput")
	}
	p.Sizes = decodeList(d, "Sizes", minTier, func(t *Tier) { t.decode(d) })
	p.Resolutions = decodeList(d, "Resolutions", minTier, func(t *Tier) { t.decode(d) })
	p.UnitPrice = d.int("UnitPrice")
}

// ---- RoutePrice ----

// AppendTo appends the encoding of r to b.
func (r *RoutePrice) AppendTo(b []byte) []byte {
	b = appendString(b, r.Route)
	return r.Price.AppendTo(b)
}

// Decode replaces r with the value encoded in b.
func (r *RoutePrice) Decode(b []byte) error {
	var d decoder
	d.reset(b, "RoutePrice")
	r.decode(&d)
	return d.finish()
}

func (r *RoutePrice) decode(d *decoder) {
	r.Route = d.string("Route")
	d.push("Price", -1)
	r.Price.decode(d)
	d.pop()
}

// ---- Source ----

// AppendTo appends the encoding of s to b.
func (s *Source) AppendTo(b []byte) []byte {
	b = appendString(b, s.Kind)
	b = appendString(b, s.Name)
	b = appendString(b, s.URL)
	b = appendString(b, s.VerifiedAt)
	return appendString(b, s.Model)
}

// Decode replaces s with the value encoded in b.
func (s *Source) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Source")
	s.decode(&d)
	return d.finish()
}

func (s *Source) decode(d *decoder) {
	s.Kind = d.string("Kind")
	s.Name = d.string("Name")
	s.URL = d.string("URL")
	s.VerifiedAt = d.string("VerifiedAt")
	s.Model = d.string("Model")
}

// ---- Model ----

// AppendTo appends the encoding of m to b. Reference and ReferenceSource are
// written only when HasReference and HasSource are set.
func (m *Model) AppendTo(b []byte) []byte {
	b = appendString(b, m.ID)
	b = appendString(b, m.Description)
	b = appendString(b, m.Notice)
	b = appendStrings(b, m.Endpoints)
	b = appendInt(b, m.ContextWindow)
	b = appendInt(b, m.MaxOutput)
	b = appendString(b, m.AutoRoute)
	b = appendList(b, m.Routes, (*RoutePrice).AppendTo)
	b = appendBool(b, m.HasReference)
	if m.HasReference {
		b = m.Reference.AppendTo(b)
	}
	b = appendBool(b, m.HasSource)
	if m.HasSource {
		b = m.ReferenceSource.AppendTo(b)
	}
	return b
}

// Decode replaces m with the value encoded in b.
func (m *Model) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Model")
	m.decode(&d)
	return d.finish()
}

func (m *Model) decode(d *decoder) {
	*m = Model{}
	m.ID = d.string("ID")
	m.Description = d.string("Description")
	m.Notice = d.string("Notice")
	m.Endpoints = d.strings("Endpoints")
	m.ContextWindow = d.int("ContextWindow")
	m.MaxOutput = d.int("MaxOutput")
	m.AutoRoute = d.string("AutoRoute")
	m.Routes = decodeList(d, "Routes", minRoutePrice, func(r *RoutePrice) { r.decode(d) })
	m.HasReference = d.bool("HasReference")
	if m.HasReference {
		d.push("Reference", -1)
		m.Reference.decode(d)
		d.pop()
	}
	m.HasSource = d.bool("HasSource")
	if m.HasSource {
		d.push("ReferenceSource", -1)
		m.ReferenceSource.decode(d)
		d.pop()
	}
}

// ---- Description ----

// AppendTo appends the encoding of x to b.
func (x *Description) AppendTo(b []byte) []byte {
	b = appendString(b, x.Name)
	b = appendStrings(b, x.Implements)
	return appendList(b, x.Models, (*Model).AppendTo)
}

// Decode replaces x with the value encoded in b.
func (x *Description) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Description")
	x.decode(&d)
	return d.finish()
}

func (x *Description) decode(d *decoder) {
	x.Name = d.string("Name")
	x.Implements = d.strings("Implements")
	x.Models = decodeList(d, "Models", minModel, func(m *Model) { m.decode(d) })
}

// ---- AdmitRequest / AdmitResult ----

// AppendTo appends the encoding of r to b.
func (r *AdmitRequest) AppendTo(b []byte) []byte {
	b = appendInt(b, r.Now)
	b = appendString(b, r.Endpoint)
	b = appendString(b, r.Model)
	b = appendString(b, r.Route)
	b = appendInt(b, r.InputTokens)
	b = appendInt(b, r.MaxOutputTokens)
	b = appendInt(b, r.DefaultOutputTokens)
	b = appendBool(b, r.Stream)
	return appendParams(b, r.Params)
}

// Decode replaces r with the value encoded in b.
func (r *AdmitRequest) Decode(b []byte) error { return r.DecodeReusing(b, nil) }

// DecodeReusing is Decode reusing the strings of the previous decode kept in
// strs (nil: none), and remembering this decode's there.
func (r *AdmitRequest) DecodeReusing(b []byte, strs *Strings) error {
	var d decoder
	d.reset(b, "AdmitRequest")
	d.strs = strs
	r.decode(&d)
	return d.finish()
}

func (r *AdmitRequest) decode(d *decoder) {
	r.Now = d.int("Now")
	r.Endpoint = d.string("Endpoint")
	r.Model = d.string("Model")
	r.Route = d.string("Route")
	r.InputTokens = d.int("InputTokens")
	r.MaxOutputTokens = d.int("MaxOutputTokens")
	r.DefaultOutputTokens = d.int("DefaultOutputTokens")
	r.Stream = d.bool("Stream")
	r.Params = decodeList(d, "Params", minParam, func(p *Param) { p.decode(d) })
}

// AppendTo appends the encoding of r to b.
func (r *AdmitResult) AppendTo(b []byte) []byte {
	b = appendInt(b, r.Hold)
	return appendParams(b, r.Set)
}

// Decode replaces r with the value encoded in b.
func (r *AdmitResult) Decode(b []byte) error {
	var d decoder
	d.reset(b, "AdmitResult")
	r.decode(&d)
	return d.finish()
}

func (r *AdmitResult) decode(d *decoder) {
	r.Hold = d.int("Hold")
	r.Set = decodeList(d, "Set", minParam, func(p *Param) { p.decode(d) })
}

// ---- Usage / SettleRequest / SettleResult ----

// AppendTo appends the encoding of u to b.
func (u *Usage) AppendTo(b []byte) []byte {
	b = appendInt(b, u.InputTokens)
	b = appendInt(b, u.CacheReadTokens)
	b = appendInt(b, u.CacheWriteTokens)
	b = appendInt(b, u.CacheWrite1hTokens)
	b = appendInt(b, u.OutputTokens)
	b = appendInt(b, u.Images)
	b = appendString(b, u.SizeTier)
	b = appendInt(b, u.Seconds)
	b = appendString(b, u.Resolution)
	return appendInt(b, u.Requests)
}

// Decode replaces u with the value encoded in b.
func (u *Usage) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Usage")
	u.decode(&d)
	return d.finish()
}

func (u *Usage) decode(d *decoder) {
	u.InputTokens = d.int("InputTokens")
	u.CacheReadTokens = d.int("CacheReadTokens")
	u.CacheWriteTokens = d.int("CacheWriteTokens")
	u.CacheWrite1hTokens = d.int("CacheWrite1hTokens")
	u.OutputTokens = d.int("OutputTokens")
	u.Images = d.int("Images")
	u.SizeTier = d.string("SizeTier")
	u.Seconds = d.int("Seconds")
	u.Resolution = d.string("Resolution")
	u.Requests = d.int("Requests")
}

// AppendTo appends the encoding of r to b.
func (r *SettleRequest) AppendTo(b []byte) []byte {
	b = appendInt(b, r.Now)
	b = appendString(b, r.Endpoint)
	b = appendString(b, r.Model)
	b = appendString(b, r.Route)
	b = r.Usage.AppendTo(b)
	return appendParams(b, r.Params)
}

// Decode replaces r with the value encoded in b.
func (r *SettleRequest) Decode(b []byte) error { return r.DecodeReusing(b, nil) }

// DecodeReusing is Decode reusing the strings of the previous decode kept in
// strs (nil: none), and remembering this decode's there.
func (r *SettleRequest) DecodeReusing(b []byte, strs *Strings) error {
	var d decoder
	d.reset(b, "SettleRequest")
	d.strs = strs
	r.decode(&d)
	return d.finish()
}

func (r *SettleRequest) decode(d *decoder) {
	r.Now = d.int("Now")
	r.Endpoint = d.string("Endpoint")
	r.Model = d.string("Model")
	r.Route = d.string("Route")
	d.push("Usage", -1)
	r.Usage.decode(d)
	d.pop()
	r.Params = decodeList(d, "Params", minParam, func(p *Param) { p.decode(d) })
}

// AppendTo appends the encoding of r to b.
func (r *SettleResult) AppendTo(b []byte) []byte { return appendInt(b, r.Charge) }

// Decode replaces r with the value encoded in b.
func (r *SettleResult) Decode(b []byte) error {
	var d decoder
	d.reset(b, "SettleResult")
	r.decode(&d)
	return d.finish()
}

func (r *SettleResult) decode(d *decoder) { r.Charge = d.int("Charge") }

// ---- Line / SelectRequest / Step / SelectResult ----

// AppendTo appends the encoding of l to b.
func (l *Line) AppendTo(b []byte) []byte {
	b = appendString(b, l.Name)
	b = appendString(b, l.Route)
	b = appendStrings(b, l.Models)
	b = appendInt(b, l.Priority)
	b = appendInt(b, l.Weight)
	return appendBool(b, l.Open)
}

// Decode replaces l with the value encoded in b.
func (l *Line) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Line")
	l.decode(&d)
	return d.finish()
}

func (l *Line) decode(d *decoder) {
	l.Name = d.string("Name")
	l.Route = d.string("Route")
	l.Models = d.strings("Models")
	l.Priority = d.int("Priority")
	l.Weight = d.int("Weight")
	l.Open = d.bool("Open")
}

// AppendTo appends the encoding of r to b.
func (r *SelectRequest) AppendTo(b []byte) []byte {
	b = appendInt(b, r.Now)
	b = appendString(b, r.Model)
	b = appendString(b, r.Route)
	return appendList(b, r.Lines, (*Line).AppendTo)
}

// Decode replaces r with the value encoded in b.
func (r *SelectRequest) Decode(b []byte) error { return r.DecodeReusing(b, nil) }

// DecodeReusing is Decode reusing the strings of the previous decode kept in
// strs (nil: none), and remembering this decode's there.
func (r *SelectRequest) DecodeReusing(b []byte, strs *Strings) error {
	var d decoder
	d.reset(b, "SelectRequest")
	d.strs = strs
	r.decode(&d)
	return d.finish()
}

func (r *SelectRequest) decode(d *decoder) {
	r.Now = d.int("Now")
	r.Model = d.string("Model")
	r.Route = d.string("Route")
	r.Lines = decodeList(d, "Lines", minLine, func(l *Line) { l.decode(d) })
}

// AppendTo appends the encoding of s to b.
func (s *Step) AppendTo(b []byte) []byte {
	b = appendString(b, s.Line)
	b = appendInt(b, s.Tier)
	return appendInt(b, s.Weight)
}

// Decode replaces s with the value encoded in b.
func (s *Step) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Step")
	s.decode(&d)
	return d.finish()
}

func (s *Step) decode(d *decoder) {
	s.Line = d.string("Line")
	s.Tier = d.int("Tier")
	s.Weight = d.int("Weight")
}

// AppendTo appends the encoding of r to b.
func (r *SelectResult) AppendTo(b []byte) []byte {
	return appendList(b, r.Plan, (*Step).AppendTo)
}

// Decode replaces r with the value encoded in b.
func (r *SelectResult) Decode(b []byte) error {
	var d decoder
	d.reset(b, "SelectResult")
	r.decode(&d)
	return d.finish()
}

func (r *SelectResult) decode(d *decoder) {
	r.Plan = decodeList(d, "Plan", minStep, func(s *Step) { s.decode(d) })
}

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
