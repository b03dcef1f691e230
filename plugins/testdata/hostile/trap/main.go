// Command trap is a hostile plugin that exports the ABI by hand, without the
// sdk and its recover: asked with the param mode=trap it dereferences a nil
// pointer, and the Go runtime aborts the instance. Any other call is served.
package main

import (
	"unsafe"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

var (
	input  []byte
	output []byte
	sink   *int
)

//go:wasmexport mr_abi_version
func abiVersion() uint32 { return abi.Version }

//go:wasmexport mr_alloc
func alloc(size uint32) uint32 {
	input = make([]byte, size)
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(input))))
}

//go:wasmexport mr_call
func call(op, ptr, n uint32) uint64 {
	var req []byte
	if n > 0 {
		req = input[:n]
	}
	switch abi.Op(op) {
	case abi.OpConfigure:
		output = abi.AppendOK(nil)
	case abi.OpDescribe:
		d := abi.Description{
			Name:       "trap",
			Implements: []string{abi.CapQuote, abi.CapPrice},
			Models: []abi.Model{{
				ID:        "trap-model",
				Endpoints: []string{"chat_completions"},
				AutoRoute: "standard",
				Routes:    []abi.RoutePrice{{Route: "standard", Price: abi.Price{Unit: "per_million_tokens", Input: 1000, Output: 2000}}},
			}},
		}
		output = d.AppendTo(abi.AppendOK(nil))
	case abi.OpAdmit:
		var r abi.AdmitRequest
		if err := r.Decode(req); err != nil {
			output = abi.EncodeError(&abi.Error{Code: abi.CodeInternal, Message: err.Error()})
			break
		}
		for _, p := range r.Params {
			if p.Name == "mode" && p.Value == "trap" {
				output = nil
				return uint64(*sink) // nil dereference: the runtime aborts
			}
		}
		res := abi.AdmitResult{Hold: 1}
		output = res.AppendTo(abi.AppendOK(nil))
	case abi.OpSettle:
		res := abi.SettleResult{Charge: 1}
		output = res.AppendTo(abi.AppendOK(nil))
	default:
		output = abi.EncodeError(&abi.Error{Code: abi.CodeInternal, Message: "unknown op"})
	}
	return abi.PackResult(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(output)))), uint32(len(output)))
}

func main() {}
