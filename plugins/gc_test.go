package plugins

import (
	"context"
	"runtime"
	"runtime/metrics"
	"testing"
)

// scanHeap is the heap the collector scans, after two full collections.
func scanHeap() int64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// TestLoadedPluginScanHeap bounds what a loaded Go plugin adds to the heap
// every garbage collection scans. Every byte of it is marked on every
// collection, on the CPU the gateway shares with its upstreams in the
// benchmark, where a collection's burst of marking is most of the gateway's
// p99 over the bare proxy's (RATIONALE.md, "Less for the collector"). tokens added
// 825 KB here when the export check asked wazero for the exported functions,
// which built and kept a definition of each of its 2,000-odd functions;
// 449 KB since checkExports reads the exports from the binary. What is left
// is wazero's: the decoded module's code entries, the instance's function
// table and its element segments. Before session 11 joined the data
// segments it was 4.2 MB.
func TestLoadedPluginScanHeap(t *testing.T) {
	const most = 550 << 10
	dir := t.TempDir()
	stage(t, dir, "tokens")
	before := scanHeap()
	h, err := Open(context.Background(), benchConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	added := scanHeap() - before
	t.Logf("tokens adds %d KB to the scanned heap", added>>10)
	if added > most {
		t.Errorf("loading tokens added %d KB to the heap every collection scans, more than %d KB", added>>10, most>>10)
	}
	runtime.KeepAlive(h)
}
