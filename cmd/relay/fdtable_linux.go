package main

import (
	"fmt"
	"os"
	"syscall"
)

// presizeFDTable grows this process's file descriptor table, once, at start,
// to hold min(want, the soft RLIMIT_NOFILE) descriptors, and returns that
// number (nothing is grown when it is under 2). Go's syscall package raises
// the soft limit to the hard one when the process starts, so this is in
// effect the hard limit (ulimit -Hn). Linux grows the table by doubling
// whenever a new descriptor does not fit, and in a multi-threaded process
// each growth waits for an RCU grace period (expand_files →
// synchronize_rcu). The thread accepting a connection
// or dialling the provider waits with it: measured on the benchmark host,
// 16–530 ms per growth, five growths in one minute of load, each a stall in
// the latency tail. Grown here, before serving, the table never grows under
// load (it never shrinks). The cost is kernel memory, about 8 bytes per slot:
// half a megabyte for 65,536.
func presizeFDTable(want int) (int, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("getrlimit: %w", err)
	}
	n := want
	if lim.Cur < uint64(n) {
		n = int(lim.Cur)
	}
	if n < 2 {
		return n, nil
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// The lowest free descriptor at or above n-1: the table must hold it.
	fd, _, errno := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_DUPFD_CLOEXEC, uintptr(n-1))
	if errno != 0 {
		return 0, fmt.Errorf("fcntl(F_DUPFD_CLOEXEC, %d): %w", n-1, errno)
	}
	syscall.Close(int(fd)) // only its slot was wanted; closing a fresh dup cannot fail usefully
	return n, nil
}
