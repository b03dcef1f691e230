package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
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
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			cur = ""
			if len(fields) == 6 && filepath.Dir(fields[5]) == dir && filepath.Ext(fields[5]) == ".sst" {
				cur = fields[5]
			}
			continue
		}
		if cur != "" && len(fields) >= 2 && fields[0] == "Rss:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			out[cur] += kb << 10
		}
	}
	return out
}

// TestPageOutTables: after enough writes for badger to make tables, the
// data blocks of those tables leave the resident set, and every key reads
// back the same.
func TestPageOutTables(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 24 MB to a ledger")
	}
	dir := t.TempDir()
	s, err := OpenBadger(dir, BadgerOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Keys outside the ledger's prefixes, 1 KB values: three memtables' worth.
	val := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 1000) }
	const n = 24_000
	for i := 0; i < n; i += 500 {
		err := s.db.Update(func(txn *badger.Txn) error {
			for j := i; j < i+500; j++ {
				if err := txn.Set(fmt.Appendf(nil, "test/%08d", j), val(j)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Wait for a flushed table (badger flushes a full memtable in the
	// background) and for compactions to settle.
	var before map[string]int64
	deadline := time.Now().Add(30 * time.Second)
	for {
		before = tableRSS(t, abs)
		var total int64
		for _, v := range before {
			total += v
		}
		if total >= 4<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no table of 4 MB resident after 30 s: %v", before)
		}
		time.Sleep(100 * time.Millisecond)
	}
	advised, err := pageOutTables(abs)
	if errors.Is(err, errPageOutUnsupported) {
		t.Skip(err)
	}
	if err != nil || advised == 0 {
		t.Fatalf("advised %d bytes, %v", advised, err)
	}
	after := tableRSS(t, abs)
	var was, is int64
	for path, rss := range before {
		if a, ok := after[path]; ok { // a table compacted away meanwhile is gone
			was += rss
			is += a
		}
	}
	t.Logf("tables resident: %d bytes before, %d after (%d advised)", was, is, advised)
	// The index and bloom filter stay: a few percent of a table.
	if was == 0 || is > was/4 {
		t.Errorf("tables resident: %d bytes before, %d after (%d advised)", was, is, advised)
	}
	err = s.db.View(func(txn *badger.Txn) error {
		for j := range n {
			item, err := txn.Get(fmt.Appendf(nil, "test/%08d", j))
			if err != nil {
				return fmt.Errorf("key %d: %w", j, err)
			}
			if err := item.Value(func(v []byte) error {
				if !bytes.Equal(v, val(j)) {
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
	for name, b := range map[string][]byte{
		"zeros.sst":    make([]byte, 148),                                     // being written: no footer yet
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
	dir := "/data/ledger"
	for _, c := range []struct {
		line string
		ok   bool
	}{
		{"7f00a0000000-7f00a0100000 r--s 00000000 fd:00 123 /data/ledger/000015.sst", true},
		{"7f00a0000000-7f00a0100000 rw-s 00000000 fd:00 123 /data/ledger/00001.mem", false},
		{"7f00a0000000-7f00a0100000 r--s 00001000 fd:00 123 /data/ledger/000015.sst", false}, // not from the start
		{"7f00a0000000-7f00a0100000 r--s 00000000 fd:00 123 /data/other/000015.sst", false},
		{"7f00a0000000-7f00a0100000 r--s 00000000 fd:00 123 /data/ledger/000015.sst (deleted)", false},
		{"7f00a0000000-7f00a0100000 rw-p 00000000 00:00 0", false},
		{"zz-7f00a0100000 r--s 00000000 fd:00 123 /data/ledger/000015.sst", false},
	} {
		start, end, path, ok := tableMapping([]byte(c.line), dir)
		if ok != c.ok {
			t.Errorf("%q: ok %v", c.line, ok)
		}
		if ok && (start != 0x7f00a0000000 || end != 0x7f00a0100000 || path != "/data/ledger/000015.sst") {
			t.Errorf("%q: %x-%x %s", c.line, start, end, path)
		}
	}
}
