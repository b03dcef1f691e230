package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
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
