package plugins

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero/api"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

// # Pool
//
// Each plugin version has at most Config.PoolSize instances. A call takes an
// idle one; while the pool has room it also starts creating one (with its
// own budget, not the caller's context) and takes whichever is ready first;
// it waits on the caller's context. Each call writes the encoded request into a guest buffer
// (mr_alloc), runs mr_call under Config.CallTimeout, and decodes the result
// envelope before the instance is released. An instance that has served
// Config.RecycleCalls calls, or whose memory grew beyond Config.RecycleBytes
// (wasm memory never shrinks), is replaced in the background. Instances keep
// state between calls; nothing of one request is meant to be visible to the
// next unless the plugin author chose so.

// Bounds on what crosses the boundary.
const (
	maxInput          = 1 << 24 // bytes of one encoded request
	maxResult         = 1 << 20 // bytes of one result envelope
	maxDescribeResult = 1 << 24 // bytes of the OpDescribe result (a whole price list)
)

// instance is one instantiated guest. It is used by one goroutine at a time
// (the one that took it from the pool) and is never shared.
type instance struct {
	mod    api.Module
	alloc  api.Function
	call   api.Function
	mem    api.Memory
	stderr *stderrLog
	guard  *guard          // the deadline of what the instance runs
	ctx    context.Context // carries guard: the context of every call
	stack  [3]uint64       // CallWithStack scratch: max(params, results) of mr_call
	buf    []byte          // encoding scratch for requests
	calls  int             // calls served, for recycling
	inPtr  uint32          // the input buffer mr_alloc last returned ...
	inSize uint32          // ... and its size; 0 = none yet
}

// minInputBuffer is the smallest input buffer asked of a guest, so that
// nearly every request fits the buffer of an earlier call (abi.ExportAlloc
// lets the host reuse it) and mr_alloc is called once per instance.
const minInputBuffer = 4096

// invoke runs op on input in the guest and returns the result envelope. The
// returned slice is a view of guest memory: it is valid only until the next
// call into this instance (memory growth moves it), so the caller decodes it
// (which copies) before releasing the instance.
func (in *instance) invoke(ctx context.Context, op abi.Op, input []byte, limit uint32) ([]byte, error) {
	if len(input) > maxInput {
		return nil, fmt.Errorf("request of %d bytes exceeds the %d-byte limit", len(input), maxInput)
	}
	// The guest may check that mr_call is handed the buffer it gave out;
	// abi.ExportAlloc lets the host reuse that buffer while inputs fit.
	if in.inSize == 0 || uint32(len(input)) > in.inSize {
		size := uint32(max(len(input), minInputBuffer))
		in.stack[0] = uint64(size)
		if err := in.alloc.CallWithStack(ctx, in.stack[:1]); err != nil {
			return nil, err
		}
		in.inPtr, in.inSize = uint32(in.stack[0]), size
		if uint64(in.inPtr)+uint64(size) > uint64(in.mem.Size()) {
			in.inSize = 0
			return nil, fmt.Errorf("%w: %s(%d) returned %#x, outside guest memory of %d bytes",
				ErrMalformed, abi.ExportAlloc, size, in.inPtr, in.mem.Size())
		}
	}
	ptr := in.inPtr
	if !in.mem.Write(ptr, input) {
		return nil, fmt.Errorf("%w: %s(%d) returned %#x, outside guest memory of %d bytes",
			ErrMalformed, abi.ExportAlloc, len(input), ptr, in.mem.Size())
	}
	in.stack[0], in.stack[1], in.stack[2] = uint64(op), uint64(ptr), uint64(len(input))
	if err := in.call.CallWithStack(ctx, in.stack[:]); err != nil {
		return nil, err
	}
	rptr, rlen := abi.UnpackResult(in.stack[0])
	if rlen > limit {
		return nil, fmt.Errorf("%w: result envelope of %d bytes exceeds the %d-byte limit", ErrMalformed, rlen, limit)
	}
	view, ok := in.mem.Read(rptr, rlen)
	if !ok {
		return nil, fmt.Errorf("%w: result envelope at %#x+%d lies outside guest memory of %d bytes",
			ErrMalformed, rptr, rlen, in.mem.Size())
	}
	return view, nil
}

func (in *instance) close() {
	// A closed runtime or an instance already closed by a trap or deadline
	// makes this a no-op; there is nothing useful to do with its error.
	_ = in.mod.Close(context.Background())
}
