package abi

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// codec is what every envelope type implements.
type codec interface {
	AppendTo(b []byte) []byte
	Decode(b []byte) error
}

func sampleModel() Model {
	return Model{
		ID:            "modela-4-opus",
		Description:   "the large one",
		Notice:        "deprecated soon",
		Endpoints:     []string{"chat_completions", "messages"},
		ContextWindow: 1_000_000,
		MaxOutput:     64_000,
		AutoRoute:     "standard",
		Routes: []RoutePrice{
			{Route: "standard", Price: Price{
				Unit: "per_million_tokens", Input: 3_000_000_000, Output: 15_000_000_000,
				CacheRead: 300_000_000, CacheWrite: 3_750_000_000, CacheWrite1h: 6_000_000_000,
				HasLongContext: true, LongContextMin: 200_000, LongContextInput: 6_000_000_000, LongContextOutput: 22_500_000_000,
			}},
			{Route: "images", Price: Price{
				Unit:        "per_image",
				Sizes:       []Tier{{Name: "1K", Price: 40_000_000}, {Name: "2K", Price: 80_000_000}},
				Resolutions: []Tier{{Name: "480p", Price: -1}},
				UnitPrice:   math.MaxInt64,
			}},
		},
		HasReference:    true,
		Reference:       Price{Unit: "per_million_tokens", Input: 4_000_000_000, Output: math.MinInt64},
		HasSource:       true,
		ReferenceSource: Source{Kind: "vendor", Name: "Vendor A", URL: "https://example.test/p", VerifiedAt: "2026-01-02", Model: "a-4"},
	}
}

// samples returns one fully populated value and one zero value of every type,
// each paired with a fresh value to decode into.
func samples() []struct {
	name     string
	in, into codec
} {
	m := sampleModel()
	type pair = struct {
		name     string
		in, into codec
	}
	return []pair{
		{"Error", &Error{Code: CodeInvalid, Field: "max_tokens", Message: "max_tokens is 10 above the limit ü"}, new(Error)},
		{"Error zero", &Error{}, new(Error)},
		{"Param", &Param{Name: "size", Value: "1024x1024"}, new(Param)},
		{"Tier", &Tier{Name: "2K", Price: 1}, new(Tier)},
		{"Price", &m.Routes[0].Price, new(Price)},
		{"Price tiers", &m.Routes[1].Price, new(Price)},
		{"RoutePrice", &m.Routes[1], new(RoutePrice)},
		{"Source", &m.ReferenceSource, new(Source)},
		{"Model", &m, new(Model)},
		{"Model zero", &Model{}, new(Model)},
		{"Description", &Description{Name: "tokens", Implements: []string{CapValidate, CapQuote, CapPrice}, Models: []Model{m, {ID: "b"}}}, new(Description)},
		{"Description zero", &Description{}, new(Description)},
		{"AdmitRequest", &AdmitRequest{
			Now: 1_790_000_000_000_000_000, Endpoint: "chat_completions", Model: "modelb-6-astra", Route: "economy",
			InputTokens: 120, MaxOutputTokens: 100, DefaultOutputTokens: 4096, Stream: true,
			Params: []Param{{Name: "size", Value: "1K"}, {Name: "size", Value: "2K"}, {}},
		}, new(AdmitRequest)},
		{"AdmitRequest negative", &AdmitRequest{Now: -1, InputTokens: math.MinInt64, MaxOutputTokens: math.MaxInt64}, new(AdmitRequest)},
		{"AdmitResult", &AdmitResult{Hold: 123456, Set: []Param{{Name: "size", Value: "1024x1024"}}}, new(AdmitResult)},
		{"Usage", &Usage{InputTokens: 1, CacheReadTokens: 2, CacheWriteTokens: 3, CacheWrite1hTokens: 4, OutputTokens: 5, Images: 6, SizeTier: "1K", Seconds: 7, Resolution: "720p", Requests: 8}, new(Usage)},
		{"SettleRequest", &SettleRequest{Now: 9, Endpoint: "messages", Model: "modela", Route: "standard", Usage: Usage{InputTokens: 90, OutputTokens: 24}, Params: []Param{{Name: "n", Value: "2"}}}, new(SettleRequest)},
		{"SettleResult", &SettleResult{Charge: 456789}, new(SettleResult)},
		{"Line", &Line{Name: "a", Route: "standard", Models: []string{"x", "y"}, Priority: -3, Weight: 7, Open: true}, new(Line)},
		{"SelectRequest", &SelectRequest{Now: 1, Model: "x", Route: "standard", Lines: []Line{{Name: "a", Models: []string{"x"}}, {Name: "b", Open: true}}}, new(SelectRequest)},
		{"SelectRequest zero", &SelectRequest{}, new(SelectRequest)},
		{"Step", &Step{Line: "a", Tier: 1, Weight: 3}, new(Step)},
		{"SelectResult", &SelectResult{Plan: []Step{{Line: "a"}, {Line: "b", Tier: 1, Weight: 2}}}, new(SelectResult)},
		{"SelectResult empty", &SelectResult{}, new(SelectResult)},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range samples() {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.in.AppendTo(nil)
			if err := tc.into.Decode(b); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(tc.in, tc.into) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", tc.into, tc.in)
			}
			// AppendTo appends: a prefix is kept.
			pre := tc.in.AppendTo([]byte("xyz"))
			if string(pre[:3]) != "xyz" || string(pre[3:]) != string(b) {
				t.Fatalf("AppendTo does not append after the prefix")
			}
		})
	}
}

func TestDecodeRejectsTruncation(t *testing.T) {
	for _, tc := range samples() {
		b := tc.in.AppendTo(nil)
		for n := 0; n < len(b); n++ {
			err := tc.into.Decode(b[:n])
			if err == nil {
				// A prefix can only decode when it is itself a complete
				// value, which a shorter encoding of the same fields is not.
				t.Errorf("%s: prefix of %d/%d bytes decoded without error", tc.name, n, len(b))
				continue
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Errorf("%s: error %T is not a *DecodeError", tc.name, err)
			}
		}
	}
}

func TestDecodeRejectsTrailingBytes(t *testing.T) {
	for _, tc := range samples() {
		b := append(tc.in.AppendTo(nil), 0)
		err := tc.into.Decode(b)
		if err == nil || !strings.Contains(err.Error(), "trailing") {
			t.Errorf("%s: trailing byte: err = %v", tc.name, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name      string
		into      codec
		in        []byte
		wantField string
		wantErr   error
	}{
		{"empty AdmitRequest", new(AdmitRequest), nil, "AdmitRequest.Now", ErrTruncated},
		{"bool is 2", new(Line), cat(u32(0), u32(0), u32(0), i64(0), i64(0), []byte{2}), "Line.Open", errBadBool},
		{"int cut short", new(SettleResult), []byte{1, 2, 3, 4, 5, 6, 7}, "SettleResult.Charge", ErrTruncated},
		{"string longer than input", new(Param), cat(u32(5), []byte("ab")), "Param.Name", ErrTruncated},
		{"length cut short", new(Param), []byte{5, 0, 0}, "Param.Name", ErrTruncated},
		{"huge count", new(SelectResult), u32(0xffff_ffff), "SelectResult.Plan", errTooMany},
		{"count above remaining/min size", new(SelectResult), cat(u32(2), []byte{0, 0, 0}), "SelectResult.Plan", errTooMany},
		{"nested field named", new(SelectRequest), cat(i64(0), u32(0), u32(0), u32(1), u32(1), []byte("a"), u32(0), u32(0), i64(0), i64(0), []byte{7}), "SelectRequest.Lines[0].Open", errBadBool},
		{"string count huge", new(Description), cat(u32(0), u32(0x7fff_ffff)), "Description.Implements", errTooMany},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.into.Decode(tt.in)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want a *DecodeError", err)
			}
			if de.Field != tt.wantField || !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v (field %q), want field %q, %v", err, de.Field, tt.wantField, tt.wantErr)
			}
		})
	}
}

func TestDecodeReusesReceiver(t *testing.T) {
	var r SelectRequest
	full := (&SelectRequest{Model: "x", Lines: []Line{{Name: "a"}}}).AppendTo(nil)
	empty := (&SelectRequest{Model: "y"}).AppendTo(nil)
	if err := r.Decode(full); err != nil {
		t.Fatal(err)
	}
	if err := r.Decode(empty); err != nil {
		t.Fatal(err)
	}
	if r.Lines != nil || r.Model != "y" {
		t.Fatalf("second Decode kept old state: %+v", r)
	}
	var m Model
	if err := m.Decode((&Model{ID: "a", HasReference: true, Reference: Price{Input: 5}}).AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if err := m.Decode((&Model{ID: "b"}).AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if m.Reference.Input != 0 {
		t.Fatalf("Model.Decode kept the old reference price: %+v", m)
	}
}

func TestResultEnvelopes(t *testing.T) {
	res := SettleResult{Charge: 42}
	ok := EncodeOK(res.AppendTo(nil))
	payload, gerr, derr := DecodeResult(ok)
	if derr != nil || gerr != nil {
		t.Fatalf("ok envelope: %v %v", gerr, derr)
	}
	var got SettleResult
	if err := got.Decode(payload); err != nil || got != res {
		t.Fatalf("payload = %+v, %v", got, err)
	}
	if b := res.AppendTo(AppendOK(nil)); string(b) != string(ok) {
		t.Fatalf("AppendOK+AppendTo = %x, EncodeOK = %x", b, ok)
	}

	e := &Error{Code: CodeInvalid, Field: "max_tokens", Message: "max_tokens 99999 is above 64000"}
	payload, gerr, derr = DecodeResult(EncodeError(e))
	if derr != nil || payload != nil || gerr == nil || *gerr != *e {
		t.Fatalf("error envelope: %v %+v %v", payload, gerr, derr)
	}
	if string(AppendError(nil, e)) != string(EncodeError(e)) {
		t.Fatal("AppendError and EncodeError differ")
	}

	// Configure's result: ok and nothing else.
	payload, gerr, derr = DecodeResult(AppendOK(nil))
	if derr != nil || gerr != nil || len(payload) != 0 {
		t.Fatalf("empty ok: %v %v %v", payload, gerr, derr)
	}

	bad := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"unknown status", []byte{2}},
		{"truncated error", []byte{1, 3, 'a'}},
		{"error with trailing", append(EncodeError(e), 0)},
	}
	for _, tt := range bad {
		if _, _, derr := DecodeResult(tt.in); derr == nil {
			t.Errorf("%s: DecodeResult accepted %x", tt.name, tt.in)
		}
	}
}

func TestPackResult(t *testing.T) {
	v := PackResult(0xdeadbeef, 0x12345678)
	if p, l := UnpackResult(v); p != 0xdeadbeef || l != 0x12345678 {
		t.Fatalf("UnpackResult(%x) = %x %x", v, p, l)
	}
}

func TestAdmitRequestDecodeAllocs(t *testing.T) {
	b := (&AdmitRequest{Endpoint: "chat_completions", Model: "modelb-6-astra", Route: "standard", InputTokens: 100,
		Params: []Param{{Name: "size", Value: "1024x1024"}}}).AppendTo(nil)
	var r AdmitRequest
	allocs := testing.AllocsPerRun(100, func() {
		if err := r.Decode(b); err != nil {
			t.Fatal(err)
		}
	})
	// Five strings and the Params slice: the decoder itself stays on the
	// stack, and field paths for errors are not built on success.
	if allocs > 6 {
		t.Fatalf("Decode allocates %v times, want at most 6", allocs)
	}
}

func BenchmarkAdmitRequestRoundTrip(b *testing.B) {
	in := AdmitRequest{Now: 1_790_000_000_000_000_000, Endpoint: "chat_completions", Model: "modelb-6-astra", Route: "economy", InputTokens: 1200, MaxOutputTokens: 1000, DefaultOutputTokens: 4096}
	buf := make([]byte, 0, 128)
	var out AdmitRequest
	b.ReportAllocs()
	for b.Loop() {
		buf = in.AppendTo(buf[:0])
		if err := out.Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// DecodeReusing returns the same values as Decode, reuses the strings of the
// previous decode when they repeat (so that a repeated call allocates
// nothing), and takes new strings when they change.
func TestDecodeReusing(t *testing.T) {
	var strs Strings
	a := AdmitRequest{Now: 7, Endpoint: "chat_completions", Model: "modela", Route: "standard", InputTokens: 12, MaxOutputTokens: 34}
	b := a
	b.Model, b.Endpoint = "modelb", ""
	for i, want := range []AdmitRequest{a, a, b, a} {
		var got AdmitRequest
		if err := got.DecodeReusing(want.AppendTo(nil), &strs); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decode %d: got %+v, want %+v", i, got, want)
		}
	}
	enc := a.AppendTo(nil)
	var got AdmitRequest
	if allocs := testing.AllocsPerRun(100, func() {
		if err := got.DecodeReusing(enc, &strs); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("a repeated decode allocated %v times, want 0", allocs)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = got.Decode(enc) }); allocs == 0 {
		t.Errorf("Decode without Strings allocated nothing: the test does not measure what it claims")
	}
}

func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func i64(v int64) []byte  { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// The min* sizes are the encodings of zero values: a count check based on
// them never rejects a well-formed list.
func TestMinSizes(t *testing.T) {
	for name, c := range map[string]struct {
		enc []byte
		min int
	}{
		"Param":      {(&Param{}).AppendTo(nil), minParam},
		"Tier":       {(&Tier{}).AppendTo(nil), minTier},
		"RoutePrice": {(&RoutePrice{}).AppendTo(nil), minRoutePrice},
		"Model":      {(&Model{}).AppendTo(nil), minModel},
		"Line":       {(&Line{}).AppendTo(nil), minLine},
		"Step":       {(&Step{}).AppendTo(nil), minStep},
		"string":     {appendString(nil, ""), 4},
	} {
		if len(c.enc) != c.min {
			t.Errorf("%s: zero value encodes to %d bytes, min size is %d", name, len(c.enc), c.min)
		}
	}
}
