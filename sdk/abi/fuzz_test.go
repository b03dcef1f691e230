package abi

import (
	"reflect"
	"testing"
)

// decoders returns a fresh value of every envelope type.
func decoders() []codec {
	return []codec{
		new(Error), new(Param), new(Tier), new(Price), new(RoutePrice), new(Source),
		new(Model), new(Description), new(AdmitRequest), new(AdmitResult), new(Usage),
		new(SettleRequest), new(SettleResult), new(Line), new(SelectRequest), new(Step),
		new(SelectResult),
	}
}

// FuzzDecode feeds arbitrary bytes to every Decode. Decoding must not panic,
// must not allocate more than the input can describe, and whatever decodes
// must survive a re-encoding unchanged.
func FuzzDecode(f *testing.F) {
	for _, s := range samples() {
		f.Add(s.in.AppendTo(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, v := range decoders() {
			if err := v.Decode(b); err != nil {
				continue
			}
			again := reflect.New(reflect.TypeOf(v).Elem()).Interface().(codec)
			if err := again.Decode(v.AppendTo(nil)); err != nil {
				t.Fatalf("%T: re-decoding its own encoding: %v", v, err)
			}
			if !reflect.DeepEqual(v, again) {
				t.Fatalf("%T: re-encoding changed the value:\n%+v\n%+v", v, v, again)
			}
		}
	})
}

// FuzzDecodeResult feeds arbitrary bytes to DecodeResult: exactly one of the
// three results is set, and it never panics.
func FuzzDecodeResult(f *testing.F) {
	f.Add(EncodeOK([]byte{1, 2, 3}))
	f.Add(EncodeError(&Error{Code: CodeInvalid, Field: "max_tokens", Message: "too many"}))
	f.Add([]byte{})
	f.Add([]byte{1, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		payload, gerr, derr := DecodeResult(b)
		switch {
		case derr != nil:
			if payload != nil || gerr != nil {
				t.Fatalf("decode error with a result: %v %v", payload, gerr)
			}
		case gerr != nil:
			if payload != nil {
				t.Fatal("guest error with a payload")
			}
			_, again, derr := DecodeResult(EncodeError(gerr))
			if derr != nil || again == nil || *again != *gerr {
				t.Fatalf("error envelope does not survive re-encoding: %+v, %v", again, derr)
			}
		default:
			if len(b) == 0 || b[0] != ResultOK || string(payload) != string(b[1:]) {
				t.Fatalf("ok payload %x from %x", payload, b)
			}
		}
	})
}
