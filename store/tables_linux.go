package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// badger writes each new table through a shared mapping of its file
// (table.CreateTable copies the whole table into it), and the ledger reads
// its tables through those mappings, with no block cache. So a table is
// wholly resident from the moment it exists, and the resident set grows
// with the ledger, journal and outcomes included, until the kernel needs
// the pages. Of a table, lookups read the index and bloom filter at its end
// on every call; the data blocks before them are read by compactions and by
// the rare lookup of a key no memtable holds. pageOutTables asks the kernel
// to reclaim those data blocks' pages.
//
// MADV_PAGEOUT is advice: it changes no byte of any mapping (a clean page of
// a file is dropped and read again when next touched; an anonymous one is
// swapped out, or left, if there is no swap). That matters because the
// mappings are found in /proc/self/maps, not handed over by badger: one that
// badger unmaps meanwhile, and whatever reuses its addresses, can only be
// paged out, never changed.

// errPageOutUnsupported: the kernel has no MADV_PAGEOUT (before 5.4).
var errPageOutUnsupported = errors.New("store: the kernel has no MADV_PAGEOUT (Linux 5.4+)")

// pageOutTables advises the kernel to reclaim the data blocks of the table
// files of dir that this process maps, and returns how many bytes it
// advised.
func pageOutTables(dir string) (int64, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	page := uint64(os.Getpagesize())
	var advised int64
	for line := range bytes.SplitSeq(maps, []byte{'\n'}) {
		start, end, path, ok := tableMapping(line, dir)
		if !ok {
			continue
		}
		data, err := tableDataLen(path)
		if err != nil {
			continue // deleted by a compaction meanwhile, or its footer not yet written
		}
		n := min(uint64(data), end-start) &^ (page - 1)
		if n == 0 {
			continue
		}
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(n), unix.MADV_PAGEOUT); e != 0 {
			if e == syscall.EINVAL {
				return advised, errPageOutUnsupported
			}
			continue // ENOMEM: unmapped meanwhile
		}
		advised += int64(n)
	}
	return advised, nil
}

// tableMapping parses one line of /proc/self/maps and reports whether it
// maps a table file of dir from its start: "start-end perms offset dev
// inode path".
func tableMapping(line []byte, dir string) (start, end uint64, path string, ok bool) {
	f := bytes.Fields(line)
	if len(f) != 6 || string(f[2]) != "00000000" || filepath.Ext(string(f[5])) != ".sst" {
		return 0, 0, "", false
	}
	path = string(f[5])
	if filepath.Dir(path) != dir {
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
// reads it the same way). A footer that does not add up is refused: a table
// still being written reads as zeros there.
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
		return 0, err
	}
	checksumLen := int64(binary.BigEndian.Uint32(b[:]))
	// A checksum is a small protobuf (algorithm and a 64-bit sum).
	if checksumLen < 1 || checksumLen > 64 || size < 8+checksumLen {
		return 0, fmt.Errorf("store: %s: checksum length %d: not a table footer", path, checksumLen)
	}
	if _, err := f.ReadAt(b[:], size-8-checksumLen); err != nil {
		return 0, err
	}
	indexLen := int64(binary.BigEndian.Uint32(b[:]))
	data := size - 8 - checksumLen - indexLen
	if indexLen < 1 || data < 0 {
		return 0, fmt.Errorf("store: %s: index length %d of a %d-byte table", path, indexLen, size)
	}
	return data, nil
}
