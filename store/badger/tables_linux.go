package badger

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/table"
	"golang.org/x/sys/unix"
)

// badger writes each new table through a shared mapping of its file
// (table.CreateTable copies the whole table into it), and the ledger reads
// its tables through those mappings, with no block cache. So every page of a
// table is mapped into this process from the moment the table exists, and
// the resident set grows with the ledger, journal and outcomes included. Of
// a table, lookups read the index and bloom filter at its end on every
// call; the data blocks before them are read by compactions and by the rare
// lookup of a key no memtable holds.
//
// releaseTables unmaps the data blocks' pages from this process's page
// tables (MADV_DONTNEED). On a shared file mapping that changes no byte:
// the pages stay in the kernel's page cache, clean (badger syncs a table as
// it creates it) or dirty (written back as usual), and the next read of one
// maps it again with a minor fault, no disk read. (MADV_PAGEOUT, tried
// first, also drops them from the page cache, and compactions then read
// their tables back from disk one page fault at a time, holding the only P.)
//
// MADV_DONTNEED on a mapping that is no longer the table's would be
// disastrous: on anonymous memory it zeroes the pages. The mappings are
// found in /proc/self/maps, so releaseTables first pins the tables it will
// advise: a badger iterator holds a reference on every table of every level
// until it is closed, and while the database is open a table is unmapped
// only when its last reference goes (Badger.Close stops the release loop
// before badger's Close unmaps every table). Which tables the iterator
// holds is not exposed, but a table joins the levels once and leaves once,
// and ids are not reused while the store is open (badger's DropAll would
// reset them; the store never calls it), so a table listed both before and
// after the iterator was made was in the levels when it was made, and is
// held.

// errNoTableMapping: tables to release, and none of their mappings found in
// /proc/self/maps (the directory renamed under the store, say).
var errNoTableMapping = errors.New("store: no mapping of the ledger's new tables in /proc/self/maps")

// releaseTables advises away the data blocks of the tables of b's database
// (in dir, its real absolute path) that it has not released before, and
// returns how many bytes it advised. released holds the ids of the tables
// released so far (or found unreleasable); ids no longer in the levels are
// dropped from it at the start of a pass. A table is released once: what is
// read of it later (by a lookup, or by the compaction that replaces it)
// stays mapped until the table is deleted. An error with one table does not
// stop the others; the first is returned. pinned, if not nil, is called with
// what was advised while the tables are still held (tests check the mappings
// then).
func (b *Store) releaseTables(dir string, released map[uint64]bool, pinned func([]tableRange)) (int64, error) {
	before := b.db.Tables()
	listed := make(map[uint64]bool, len(before))
	fresh := false
	for _, t := range before {
		listed[t.ID] = true
		fresh = fresh || !released[t.ID]
	}
	for id := range released {
		if !listed[id] {
			delete(released, id) // deleted: its id will not come back
		}
	}
	if !fresh {
		return 0, nil
	}
	txn := b.db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{}) // pins every table in the levels
	defer it.Close()
	after := b.db.Tables()

	held := make(map[string]uint64, len(after)) // file name → id
	for _, t := range after {
		if listed[t.ID] && !released[t.ID] {
			held[filepath.Base(table.NewFilename(t.ID, dir))] = t.ID
		}
	}
	if len(held) == 0 {
		return 0, nil // every new table was made while the levels were read
	}

	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	page := uint64(os.Getpagesize())
	var (
		advised  int64
		ranges   []tableRange
		matched  int
		firstErr error
	)
	for line := range bytes.SplitSeq(maps, []byte{'\n'}) {
		start, end, path, ok := tableMapping(line, dir)
		if !ok {
			continue
		}
		id, ok := held[filepath.Base(path)]
		if !ok {
			continue // released already, made after the iterator, or on its way out
		}
		matched++
		released[id] = true // once, even if it fails: the error is said once
		data, err := tableDataLen(path)
		if err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		n := min(uint64(data), end-start) &^ (page - 1)
		if n == 0 {
			continue
		}
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(n), unix.MADV_DONTNEED); e != 0 {
			firstErr = cmp.Or(firstErr, fmt.Errorf("store: madvise %s: %w", path, e))
			continue
		}
		advised += int64(n)
		ranges = append(ranges, tableRange{start, start + n, path})
	}
	if matched == 0 {
		return 0, errNoTableMapping
	}
	if pinned != nil {
		pinned(ranges)
	}
	return advised, firstErr
}

// tableMapping parses one line of /proc/self/maps, "start-end perms offset
// dev inode path", and reports whether it is a shared mapping of a table
// file of dir from the file's start. A deleted file's path ends in
// " (deleted)", which is not a table's name.
func tableMapping(line []byte, dir string) (start, end uint64, path string, ok bool) {
	var f [5][]byte
	rest := line
	for i := range f {
		rest = bytes.TrimLeft(rest, " ")
		var found bool
		if f[i], rest, found = bytes.Cut(rest, []byte{' '}); !found {
			return 0, 0, "", false
		}
	}
	path = string(bytes.TrimLeft(rest, " "))
	if len(f[1]) != 4 || f[1][3] != 's' || string(f[2]) != "00000000" ||
		filepath.Ext(path) != ".sst" || filepath.Dir(path) != dir {
		return 0, 0, "", false
	}
	lo, hi, found := bytes.Cut(f[0], []byte{'-'})
	if !found {
		return 0, 0, "", false
	}
	start, err1 := strconv.ParseUint(string(lo), 16, 64)
	end, err2 := strconv.ParseUint(string(hi), 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return 0, 0, "", false
	}
	return start, end, path, true
}

// tableDataLen reads a badger table's footer and returns the length of its
// data blocks: the table is blocks, index, index length (4 bytes), checksum,
// checksum length (4 bytes), the lengths big-endian (badger's table.initIndex
// reads it the same way). A footer that does not add up is refused.
func tableDataLen(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	var b [4]byte
	if _, err := f.ReadAt(b[:], size-4); err != nil {
		return 0, fmt.Errorf("store: %s: %w", path, err)
	}
	checksumLen := int64(binary.BigEndian.Uint32(b[:]))
	// A checksum is a small protobuf (algorithm and a 64-bit sum; proto3
	// leaves out zeros, so a CRC32C sum of 0 is 0 bytes).
	if checksumLen > 64 || size < 8+checksumLen {
		return 0, fmt.Errorf("store: %s: checksum length %d: not a table footer", path, checksumLen)
	}
	if _, err := f.ReadAt(b[:], size-8-checksumLen); err != nil {
		return 0, fmt.Errorf("store: %s: %w", path, err)
	}
	indexLen := int64(binary.BigEndian.Uint32(b[:]))
	data := size - 8 - checksumLen - indexLen
	if indexLen < 1 || data < 0 {
		return 0, fmt.Errorf("store: %s: index length %d of a %d-byte table", path, indexLen, size)
	}
	return data, nil
}
