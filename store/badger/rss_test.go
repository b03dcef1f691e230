package badger

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// BenchmarkLedgerRSS measures the memory the store costs a process: the
// growth of the resident set (and of its peak) and the Go heap while 200,000
// hold+settle pairs run on a store on disk, 8 callers over 16 accounts. It
// reports numbers and asserts none; run it alone, once, so that nothing else
// in the process moves the resident set:
//
//	go test ./store -run '^$' -bench LedgerRSS -benchtime 1x
//
// It reads /proc/self/status and is skipped where there is none.
func BenchmarkLedgerRSS(b *testing.B) {
	const (
		pairs    = 200_000
		callers  = 8
		accounts = 16
	)
	if _, err := readProcStatus(); err != nil {
		b.Skipf("no resident set size: %v", err)
	}
	for range b.N {
		b.StopTimer()
		runtime.GC()
		before, err := readProcStatus()
		if err != nil {
			b.Fatal(err)
		}
		var heapBefore runtime.MemStats
		runtime.ReadMemStats(&heapBefore)

		dir := b.TempDir()
		s, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		for a := range accounts {
			credit(b, s, "acct_"+strconv.Itoa(a), 1_000_000*usd)
		}
		opened, err := readProcStatus()
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		ctx := context.Background()
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				for i := c; i < pairs; i += callers {
					if err := holdSettle(ctx, s, "acct_"+strconv.Itoa(i%accounts), "", "req_"+strconv.Itoa(i)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		after, err := readProcStatus()
		if err != nil {
			b.Fatal(err)
		}
		var heapAfter runtime.MemStats
		runtime.ReadMemStats(&heapAfter)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		var disk int64 // the tables and logs a closed store keeps
		_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					disk += fi.Size()
				}
			}
			return nil
		})
		const mb = 1 << 20
		b.ReportMetric(float64(disk)/mb, "disk-MB")
		b.ReportMetric(float64(opened.rss-before.rss)/mb, "open-RSS-MB")
		b.ReportMetric(float64(after.rss-before.rss)/mb, "RSS-growth-MB")
		b.ReportMetric(float64(after.hwm-before.rss)/mb, "peak-RSS-growth-MB")
		b.ReportMetric(float64(after.anon-before.anon)/mb, "anon-RSS-growth-MB")
		b.ReportMetric(float64(after.file-before.file)/mb, "file-RSS-growth-MB")
		b.ReportMetric(float64(int64(heapAfter.HeapInuse)-int64(heapBefore.HeapInuse))/mb, "heap-inuse-growth-MB")
		b.ReportMetric(float64(heapAfter.Sys)/mb, "go-sys-MB")
		b.StartTimer()
	}
}

// procStatus is the resident set size, its peak, and its anonymous (Go
// heap, badger's arenas) and file-backed (mapped tables and logs) parts, in
// bytes.
type procStatus struct{ rss, hwm, anon, file int64 }

func readProcStatus() (procStatus, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return procStatus{}, err
	}
	defer f.Close()
	var st procStatus
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		var field *int64
		switch name {
		case "VmRSS":
			field = &st.rss
		case "VmHWM":
			field = &st.hwm
		case "RssAnon":
			field = &st.anon
		case "RssFile":
			field = &st.file
		}
		if !ok || field == nil {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return procStatus{}, err
		}
		*field = kb << 10
	}
	return st, sc.Err()
}

// The store opens with the memory budget badger.go describes, on disk and in
// memory alike.
func TestBadgerMemoryOptions(t *testing.T) {
	mem, err := Open("", Options{InMemory: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	for name, b := range map[string]*Store{"disk": openTemp(t), "memory": mem} {
		o := b.db.Opts()
		got := []int64{o.MemTableSize, int64(o.NumMemtables), int64(o.NumLevelZeroTables), int64(o.NumLevelZeroTablesStall),
			o.BaseTableSize, o.BlockCacheSize, o.IndexCacheSize, o.ValueLogFileSize}
		want := []int64{8 << 20, 2, 2, 8, 1 << 20, 0, 0, 16 << 20}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: memtable, memtables, L0 tables, L0 stall, base table, block cache, index cache, vlog file = %v, want %v", name, got, want)
		}
	}
}
