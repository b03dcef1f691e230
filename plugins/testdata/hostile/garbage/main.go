// Command garbage is a hostile plugin that exports the ABI by hand and, asked
// with the param mode=M, answers OpAdmit with a result envelope the host must
// refuse:
//
//	status    an unknown status byte
//	empty     an envelope of zero bytes
//	outside   a pointer beyond its memory
//	huge      a length above the host's result limit
//	trailing  a valid result followed by junk
//	negative  a negative hold
//	truncated an error envelope whose message runs past its end
//	echo      the bytes of the param "envelope", verbatim (for fuzzing)
//
// Any other call is served.
package main

import (
	"unsafe"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

var (
	input  []byte
	output []byte
)

//go:wasmexport mr_abi_version
func abiVersion() uint32 { return abi.Version }

//go:wasmexport mr_alloc
func alloc(size uint32) uint32 {
	input = make([]byte, size)
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(input))))
}

func pack(b []byte) uint64 {
	output = b
	return abi.PackResult(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), uint32(len(b)))
}

//go:wasmexport mr_call
func call(op, ptr, n uint32) uint64 {
	var req []byte
	if n > 0 {
		req = input[:n]
	}
	switch abi.Op(op) {
	case abi.OpConfigure:
		return pack(abi.AppendOK(nil))
	case abi.OpDescribe:
		d := abi.Description{
			Name:       "garbage",
			Implements: []string{abi.CapQuote, abi.CapPrice},
			Models: []abi.Model{{
				ID:        "garbage-model",
				Endpoints: []string{"chat_completions"},
				AutoRoute: "standard",
				Routes:    []abi.RoutePrice{{Route: "standard", Price: abi.Price{Unit: "per_million_tokens", Input: 1000, Output: 2000}}},
			}},
		}
		return pack(d.AppendTo(abi.AppendOK(nil)))
	case abi.OpAdmit:
		var r abi.AdmitRequest
		if err := r.Decode(req); err != nil {
			return pack(abi.EncodeError(&abi.Error{Code: abi.CodeInternal, Message: err.Error()}))
		}
		mode, envelope := "", ""
		for _, p := range r.Params {
			switch p.Name {
			case "mode":
				mode = p.Value
			case "envelope":
				envelope = p.Value
			}
		}
		ok := abi.AdmitResult{Hold: 1}
		switch mode {
		case "status":
			return pack([]byte{7, 1, 2, 3})
		case "empty":
			return pack(nil)
		case "outside":
			return abi.PackResult(0xFFFF_FF00, 200)
		case "huge":
			return abi.PackResult(0, 64<<20)
		case "trailing":
			return pack(append(ok.AppendTo(abi.AppendOK(nil)), 0xEE, 0xEE))
		case "negative":
			neg := abi.AdmitResult{Hold: -5}
			return pack(neg.AppendTo(abi.AppendOK(nil)))
		case "truncated":
			return pack([]byte{abi.ResultError, 200})
		case "echo":
			return pack([]byte(envelope))
		}
		return pack(ok.AppendTo(abi.AppendOK(nil)))
	case abi.OpSettle:
		res := abi.SettleResult{Charge: 1}
		return pack(res.AppendTo(abi.AppendOK(nil)))
	}
	return pack(abi.EncodeError(&abi.Error{Code: abi.CodeInternal, Message: "unknown op"}))
}

func main() {}
