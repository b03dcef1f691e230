// Command version is a hostile plugin that speaks ABI version 7. The host
// must refuse it at load, naming both versions.
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
func abiVersion() uint32 { return 7 }

//go:wasmexport mr_alloc
func alloc(size uint32) uint32 {
	input = make([]byte, size)
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(input))))
}

//go:wasmexport mr_call
func call(op, ptr, n uint32) uint64 {
	output = abi.EncodeError(&abi.Error{Code: abi.CodeInternal, Message: "speaks version 7"})
	return abi.PackResult(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(output)))), uint32(len(output)))
}

func main() {}
