//go:build linux

package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
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
	// The descriptor that grew the table is closed: a new one takes the
	// lowest free number again.
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if int(f.Fd()) >= n-1 {
		t.Fatalf("a new descriptor is %d: the one at %d was not closed", f.Fd(), n-1)
	}
}
