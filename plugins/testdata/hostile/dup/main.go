// Command dup is a hostile plugin that claims modelb-6-astra, a model the
// first-party tokens plugin serves. Loaded beside tokens, it must be refused
// with an error naming both plugins and the model.
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

//go:wasmexport mr_call
func call(op, ptr, n uint32) uint64 {
	switch abi.Op(op) {
	case abi.OpConfigure:
		output = abi.AppendOK(nil)
	case abi.OpDescribe:
		d := abi.Description{
			Name:       "dup",
			Implements: []string{abi.CapQuote, abi.CapPrice},
			Models: []abi.Model{{
				ID:        "modelb-6-astra",
				Endpoints: []string{"chat_completions"},
				AutoRoute: "standard",
				Routes:    []abi.RoutePrice{{Route: "standard", Price: abi.Price{Unit: "per_million_tokens", Input: 1, Output: 1}}},
			}},
		}
		output = d.AppendTo(abi.AppendOK(nil))
	default:
		res := abi.AdmitResult{Hold: 1}
		output = res.AppendTo(abi.AppendOK(nil))
	}
	return abi.PackResult(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(output)))), uint32(len(output)))
}

func main() {}
