package main

import (
	"strings"
	"testing"
)

// TestParseGauges reads the goroutines and heap in use of a gateway's
// exposition, and refuses one without them.
func TestParseGauges(t *testing.T) {
	text := "# TYPE go_goroutines gauge\ngo_goroutines 152\n# TYPE go_memstats_heap_inuse_bytes gauge\ngo_memstats_heap_inuse_bytes 1.5e+08\n"
	g, err := parseGauges(strings.NewReader(text))
	if err != nil || g.Goroutines != 152 || g.HeapInuse != 1.5e8 {
		t.Fatalf("parseGauges = %+v, %v", g, err)
	}
	if _, err := parseGauges(strings.NewReader("# TYPE go_goroutines gauge\ngo_goroutines 1\n")); err == nil {
		t.Fatal("an exposition without the heap gauge was read")
	}
}
