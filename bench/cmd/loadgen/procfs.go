package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// memStatus is what the benchmark reads of /proc/PID/status, in bytes.
type memStatus struct {
	RSS  int64 // VmRSS: resident set size now
	HWM  int64 // VmHWM: peak resident set size
	Anon int64 // RssAnon: the anonymous part of RSS (heap, stacks); 0 if absent
	File int64 // RssFile: the file-backed part (binary, mmapped files); 0 if absent
}

// readMemStatus reads /proc/PID/status.
func readMemStatus(pid int) (memStatus, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memStatus{}, err
	}
	defer f.Close()
	m, err := parseMemStatus(f)
	if err != nil {
		return memStatus{}, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return m, nil
}

// parseMemStatus reads the VmRSS, VmHWM, RssAnon and RssFile lines
// ("VmRSS:	  12345 kB") of a /proc/PID/status file. VmRSS and VmHWM must
// be present (RssAnon and RssFile exist since Linux 4.5).
func parseMemStatus(r io.Reader) (memStatus, error) {
	var m memStatus
	var haveRSS, haveHWM bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, rest, ok := bytes.Cut(sc.Bytes(), []byte{':'})
		if !ok {
			continue
		}
		var dst *int64
		switch string(name) {
		case "VmRSS":
			dst, haveRSS = &m.RSS, true
		case "VmHWM":
			dst, haveHWM = &m.HWM, true
		case "RssAnon":
			dst = &m.Anon
		case "RssFile":
			dst = &m.File
		default:
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return memStatus{}, fmt.Errorf("%s: %q is not \"N kB\"", name, bytes.TrimSpace(rest))
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 || kb > 1<<40 {
			return memStatus{}, fmt.Errorf("%s: %q is not a size in kB", name, f[0])
		}
		*dst = kb << 10
	}
	if err := sc.Err(); err != nil {
		return memStatus{}, err
	}
	if !haveRSS || !haveHWM {
		return memStatus{}, fmt.Errorf("VmRSS or VmHWM missing (a kernel thread, or not Linux)")
	}
	return m, nil
}

// rssParts is a process's resident set split by what is mapped, read from
// /proc/PID/smaps, in bytes. The four parts add up to VmRSS (give or take
// the pages that change between the two reads).
type rssParts struct {
	Data    int64 `json:"anon_data"`  // anonymous, not executable: Go heap (wazero's guest memories are in it), stacks, the runtime's own
	Code    int64 `json:"anon_code"`  // anonymous and executable: native code compiled at run time (wazero's, from the plugins)
	Files   int64 `json:"data_files"` // mapped files other than the program: the ledger's tables and logs, the hold log
	Program int64 `json:"program"`    // the executable, shared libraries, vdso and the like
}

// readSmaps reads /proc/PID/smaps, telling the program's own mappings by
// /proc/PID/exe.
func readSmaps(pid int) (rssParts, error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return rssParts{}, err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return rssParts{}, err
	}
	defer f.Close()
	p, err := parseSmaps(f, exe)
	if err != nil {
		return rssParts{}, fmt.Errorf("/proc/%d/smaps: %w", pid, err)
	}
	return p, nil
}

// parseSmaps adds up the Rss of every mapping of a smaps file by kind. A
// mapping's header is "start-end perms offset dev inode [path]"; its
// fields follow as "Name: value" lines.
func parseSmaps(r io.Reader, exe string) (rssParts, error) {
	var p rssParts
	var cur *int64 // where the current mapping's Rss goes
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 0 {
			continue
		}
		if !bytes.HasSuffix(f[0], []byte{':'}) { // a mapping's header
			if len(f) < 5 || !bytes.Contains(f[0], []byte{'-'}) || len(f[1]) != 4 {
				return rssParts{}, fmt.Errorf("%q is not a mapping header", sc.Bytes())
			}
			path := ""
			if len(f) > 5 {
				path = string(bytes.Join(f[5:], []byte{' '}))
			}
			exec := f[1][2] == 'x'
			switch {
			case path == "" && exec:
				cur = &p.Code
			case path == "" || strings.HasPrefix(path, "[heap]") || strings.HasPrefix(path, "[stack") || strings.HasPrefix(path, "[anon"):
				cur = &p.Data
			case path == exe || strings.HasPrefix(path, "[") || strings.Contains(path, ".so"):
				cur = &p.Program
			default:
				cur = &p.Files
			}
			continue
		}
		if string(f[0]) != "Rss:" {
			continue
		}
		if cur == nil || len(f) != 3 || string(f[2]) != "kB" {
			return rssParts{}, fmt.Errorf("%q: an Rss line outside a mapping, or not \"N kB\"", sc.Bytes())
		}
		kb, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil || kb < 0 || kb > 1<<40 {
			return rssParts{}, fmt.Errorf("Rss: %q is not a size in kB", f[1])
		}
		if *cur > math.MaxInt64-kb<<10 {
			return rssParts{}, errors.New("Rss adds up to more than an int64")
		}
		*cur += kb << 10
	}
	return p, sc.Err()
}
