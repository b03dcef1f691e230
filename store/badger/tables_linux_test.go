package badger

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/table"
	"golang.org/x/sys/unix"
)

// tableRSS is the resident size of each of dir's table files this process
// maps, from /proc/self/smaps.
func tableRSS(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	out := map[string]int64{}
	cur := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if _, _, path, ok := tableMapping(line, dir); ok {
			cur = path
			continue
		}
		fields := strings.Fields(string(line))
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			cur = "" // another mapping's header
			continue
		}
		if cur != "" && len(fields) >= 2 && fields[0] == "Rss:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			out[cur] += kb << 10
		}
	}
	return out
}

// pageCached counts the pages of dir's mapped tables that the page cache
// holds, whether or not this process maps them (mincore reports the page
// cache for a file mapping; it changes nothing, so a table unmapped
// meanwhile is only skipped).
func pageCached(t *testing.T, dir string) (cached, pages int) {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no maps: %v", err)
	}
	for line := range bytes.SplitSeq(maps, []byte{'\n'}) {
		start, end, _, ok := tableMapping(line, dir)
		if !ok {
			continue
		}
		n := int(end-start) / os.Getpagesize()
		vec := make([]byte, n)
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(start), uintptr(end-start), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			continue
		}
		for _, v := range vec {
			cached += int(v & 1)
		}
		pages += n
	}
	return cached, pages
}

// fillTables writes n 1 KB values under test/ and waits until badger has
// flushed at least 4 MB of them into tables.
func fillTables(t *testing.T, s *Store, n int) {
	t.Helper()
	for i := 0; i < n; i += 500 {
		err := s.db.Update(func(txn *badger.Txn) error {
			for j := i; j < min(i+500, n); j++ {
				if err := txn.Set(fmt.Appendf(nil, "test/%08d", j), testValue(j)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var total int64
		for _, ti := range s.db.Tables() {
			total += int64(ti.OnDiskSize)
		}
		if total >= 4<<20 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d bytes of tables 30 s after writing", total)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitQuiet waits until badger's flushes and compactions are done: the
// same tables for 300 ms, and every table file this process maps in dir in
// the levels. A table being made is mapped (and resident) before it joins
// the levels, and stays so while its file is synced, which on a slow disk
// takes longer than 300 ms; releaseTables leaves it until it has joined.
func waitQuiet(t *testing.T, s *Store, dir string) {
	t.Helper()
	state := func() string {
		var b strings.Builder
		in := map[string]bool{}
		for _, ti := range s.db.Tables() {
			fmt.Fprintf(&b, "%d,", ti.ID)
			in[filepath.Base(table.NewFilename(ti.ID, dir))] = true
		}
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Skipf("no maps: %v", err)
		}
		for line := range bytes.SplitSeq(maps, []byte{'\n'}) {
			if _, _, path, ok := tableMapping(line, dir); ok && !in[filepath.Base(path)] {
				return "" // a table being made
			}
		}
		return b.String()
	}
	deadline := time.Now().Add(30 * time.Second)
	last := state()
	for quiet := time.Now(); last == "" || time.Since(quiet) < 300*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatal("badger still flushing or compacting 30 s after the writes")
		}
		time.Sleep(20 * time.Millisecond)
		if now := state(); now != last {
			last, quiet = now, time.Now()
		}
	}
}

func testValue(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 1000) }

// readBack checks that every one of the n keys reads back its value.
func readBack(t *testing.T, s *Store, n int) {
	t.Helper()
	err := s.db.View(func(txn *badger.Txn) error {
		for j := range n {
			item, err := txn.Get(fmt.Appendf(nil, "test/%08d", j))
			if err != nil {
				return fmt.Errorf("key %d: %w", j, err)
			}
			if err := item.Value(func(v []byte) error {
				if !bytes.Equal(v, testValue(j)) {
					return fmt.Errorf("key %d: value changed", j)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func openTestTables(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	// No release loop: the tests release by hand, and a pass of the loop
	// between their measurements would take the tables from under them.
	s, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler), releaseEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, real
}

// TestReleaseTables: after enough writes for badger to make tables, their
// data blocks leave the resident set but stay in the page cache, and every
// key reads back the same.
func TestReleaseTables(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 24 MB to a ledger")
	}
	s, dir := openTestTables(t)
	const n = 24_000
	fillTables(t, s, n)
	waitQuiet(t, s, dir)
	before := tableRSS(t, dir)
	released := map[uint64]bool{}
	// Only the tables advised are measured: one a late flush or compaction
	// made meanwhile is resident, and not the release's to shrink.
	var ranges []tableRange
	advised, err := s.releaseTables(dir, released, func(r []tableRange) { ranges = r })
	if err != nil || advised == 0 {
		t.Fatalf("advised %d bytes, %v", advised, err)
	}
	measured := map[string]bool{}
	for _, r := range ranges {
		measured[r.path] = true
	}
	first := len(released)
	// A second pass advises only tables a late compaction made meanwhile.
	if again, err := s.releaseTables(dir, released, nil); err != nil || (again != 0 && len(released) == first) {
		t.Errorf("a second release with no new table advised %d bytes, %v; want 0", again, err)
	}
	after := tableRSS(t, dir)
	cached, pages := pageCached(t, dir)
	var was, is int64
	for path, rss := range before {
		if a, ok := after[path]; ok && measured[path] { // a table compacted away meanwhile is gone
			was += rss
			is += a
		}
	}
	t.Logf("tables resident: %d bytes before, %d after (%d advised); %d of %d pages in the page cache",
		was, is, advised, cached, pages)
	// The index and bloom filter stay: a few percent of a table.
	if was == 0 || is > was/4 {
		t.Errorf("tables resident: %d bytes before, %d after (%d advised)", was, is, advised)
	}
	// Released, not evicted: the next read finds the page in memory.
	if pages == 0 || cached < pages*9/10 {
		t.Errorf("%d of %d table pages in the page cache after the release", cached, pages)
	}
	readBack(t, s, n)
}

// TestReleaseTablesWhileCompacting releases tables over and over while
// writes make badger flush and compact, so tables come and go between the
// release's reads of the levels and of /proc/self/maps. While the tables
// are still pinned, every range advised must still be a mapping of the
// table it was advised as (the property that makes MADV_DONTNEED safe), and
// afterwards every key must read back the same.
func TestReleaseTablesWhileCompacting(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 40 MB to a ledger")
	}
	s, dir := openTestTables(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var (
		passes     atomic.Int64
		checked    int
		advised    int64
		releaseErr error
	)
	check := func(ranges []tableRange) {
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			releaseErr = err
			return
		}
		for _, r := range ranges {
			found := false
			for line := range bytes.SplitSeq(maps, []byte{'\n'}) {
				start, end, path, ok := tableMapping(line, dir)
				if ok && path == r.path && start == r.start && end >= r.end {
					found = true
					break
				}
			}
			if !found {
				releaseErr = fmt.Errorf("advised %x-%x as %s, no longer its mapping while pinned", r.start, r.end, r.path)
				return
			}
			checked++
		}
	}
	wg.Go(func() {
		released := map[uint64]bool{}
		for releaseErr == nil {
			select {
			case <-stop:
				return
			default:
			}
			n, err := s.releaseTables(dir, released, check)
			if err != nil {
				releaseErr = err
				return
			}
			if n > 0 {
				passes.Add(1)
				advised += n
			}
			time.Sleep(time.Millisecond)
		}
	})
	const n = 40_000
	fillTables(t, s, n)
	if err := s.db.Flatten(2); err != nil {
		t.Fatal(err)
	}
	// On a slow disk the writes can be over before the loop has seen more
	// than one set of tables; the flattened levels are new tables, so the
	// loop has more to release, and the test waits for it to.
	for deadline := time.Now().Add(30 * time.Second); passes.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if releaseErr != nil {
		t.Fatal(releaseErr)
	}
	t.Logf("%d passes advised %d bytes of %d tables while writing and compacting", passes.Load(), advised, checked)
	if passes.Load() < 2 || checked == 0 {
		t.Errorf("%d passes advised %d tables: the test released too little to test anything", passes.Load(), checked)
	}
	readBack(t, s, n)
}

func TestTableDataLen(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// blocks (100) | index (30) | index length | checksum (10) | checksum length
	table := make([]byte, 0, 148)
	table = append(table, make([]byte, 100)...)
	table = append(table, make([]byte, 30)...)
	table = binary.BigEndian.AppendUint32(table, 30)
	table = append(table, make([]byte, 10)...)
	table = binary.BigEndian.AppendUint32(table, 10)
	if n, err := tableDataLen(write("ok.sst", table)); err != nil || n != 100 {
		t.Errorf("a table: %d, %v", n, err)
	}
	// A CRC32C checksum of 0 is an empty protobuf.
	zeroSum := binary.BigEndian.AppendUint32(append(make([]byte, 130), 0, 0, 0, 30), 0)
	if n, err := tableDataLen(write("zerosum.sst", zeroSum)); err != nil || n != 100 {
		t.Errorf("a table with an empty checksum: %d, %v", n, err)
	}
	for name, b := range map[string][]byte{
		"zeros.sst":    make([]byte, 148),                                     // no footer
		"checksum.sst": binary.BigEndian.AppendUint32(make([]byte, 10), 5000), // checksum longer than any
		"index.sst":    append(binary.BigEndian.AppendUint32(make([]byte, 4), 9999), append(make([]byte, 10), 0, 0, 0, 10)...),
		"short.sst":    {0, 0, 1},
		"noindex.sst":  append(binary.BigEndian.AppendUint32(make([]byte, 20), 0), append(make([]byte, 10), 0, 0, 0, 10)...),
	} {
		if n, err := tableDataLen(write(name, b)); err == nil {
			t.Errorf("%s: %d, want an error", name, n)
		}
	}
	if _, err := tableDataLen(filepath.Join(dir, "missing.sst")); err == nil {
		t.Error("a missing table: no error")
	}
}

func TestTableMapping(t *testing.T) {
	for _, c := range []struct {
		line, dir string
		ok        bool
	}{
		{"7f00a0000000-7f00a0100000 r--s 00000000 fd:00 123                        /data/ledger/000015.sst", "/data/ledger", true},
		{"7f00a0000000-7f00a0100000 rw-s 00000000 fd:00 123 /data/my ledger/000015.sst", "/data/my ledger", true},
		{"7f00a0000000-7f00a0100000 rw-s 00000000 fd:00 123 /data/ledger/00001.mem", "/data/ledger", false},
		{"7f00a0000000-7f00a0100000 r--p 00000000 fd:00 123 /data/ledger/000015.sst", "/data/ledger", false}, // private
		{"7f00a0000000-7f00a0100000 r--s 00001000 fd:00 123 /data/ledger/000015.sst", "/data/ledger", false}, // not from the start
		{"7f00a0000000-7f00a0100000 r--s 00000000 fd:00 123 /data/other/000015.sst", "/data/ledger", false},
		{"7f00a0000000-7f00a0100000 r--s 00000000 fd:00 123 /data/ledger/000015.sst (deleted)", "/data/ledger", false},
		{"7f00a0000000-7f00a0100000 rw-p 00000000 00:00 0", "/data/ledger", false},
		{"zz-7f00a0100000 r--s 00000000 fd:00 123 /data/ledger/000015.sst", "/data/ledger", false},
		{"", "/data/ledger", false},
	} {
		start, end, path, ok := tableMapping([]byte(c.line), c.dir)
		if ok != c.ok {
			t.Errorf("%q: ok %v", c.line, ok)
		}
		if ok && (start != 0x7f00a0000000 || end != 0x7f00a0100000 || path != c.dir+"/000015.sst") {
			t.Errorf("%q: %x-%x %s", c.line, start, end, path)
		}
	}
}

// TestReleaseLoop: a store on disk releases its tables by itself.
func TestReleaseLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 24 MB to a ledger")
	}
	dir := t.TempDir()
	s, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler), releaseEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	fillTables(t, s, 24_000)
	waitQuiet(t, s, real)
	var onDisk, resident int64
	for _, ti := range s.db.Tables() {
		onDisk += int64(ti.OnDiskSize)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resident = 0
		for _, v := range tableRSS(t, real) {
			resident += v
		}
		if resident < onDisk/4 {
			return
		}
	}
	t.Errorf("%d of %d bytes of tables still resident 10 s after the writes", resident, onDisk)
}
