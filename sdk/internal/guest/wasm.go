//go:build wasip1

package guest

import (
	"unsafe"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

// The guest side of the ABI. The host writes a call's input into the buffer
// mr_alloc returns, then calls mr_call, and copies the result envelope out
// before its next call. Both buffers live in package variables, so the
// garbage collector keeps them (Go's collector does not move objects), and
// they are reused from call to call.
var (
	input  []byte
	output []byte
	cache  decodeCache // strings of the last call per operation
)

//go:wasmexport mr_abi_version
func exportVersion() uint32 { return abi.Version }

//go:wasmexport mr_alloc
func exportAlloc(size uint32) uint32 {
	if cap(input) < int(size) || cap(input) == 0 {
		input = make([]byte, max(int(size), 64))
	}
	input = input[:size]
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(input[:cap(input)]))))
}

//go:wasmexport mr_call
func exportCall(op, ptr, length uint32) uint64 {
	base := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(input[:cap(input)]))))
	if cap(input) == 0 || ptr != base || int(length) > len(input) {
		// The host must hand back the buffer mr_alloc returned.
		output = abi.AppendError(output[:0], internal("mr_call: input %d+%d is not the buffer mr_alloc returned (%d, %d bytes)", ptr, length, base, len(input)))
	} else {
		output = appendCall(output[:0], abi.Op(op), input[:length], &cache)
	}
	return abi.PackResult(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(output)))), uint32(len(output)))
}
