//go:build linux

package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// fdSize is the size of this process's descriptor table (FDSize in
// /proc/self/status).
func fdSize(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "FDSize:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no FDSize in /proc/self/status")
	return 0
}

func TestPresizeFDTable(t *testing.T) {
	before := fdSize(t)
	want := max(4*before, 4096)
	n, err := presizeFDTable(want)
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Skipf("RLIMIT_NOFILE allows %d descriptors", n)
	}
	if got := fdSize(t); got < n {
		t.Fatalf("FDSize %d after presizeFDTable(%d) = %d (was %d)", got, want, n, before)
	}
	// The descriptor that grew the table is closed again (n-1 was free
	// before: the table was smaller).
	if n-1 >= before {
		_, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(n-1), syscall.F_GETFD, 0)
		if errno != syscall.EBADF {
			t.Fatalf("descriptor %d is still open after presizeFDTable (fcntl: %v)", n-1, errno)
		}
	}
}
