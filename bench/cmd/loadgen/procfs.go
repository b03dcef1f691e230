package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
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
	Files   int64 `json:"data_files"` // other mapped files and shared memory: the ledger's tables and logs, the hold log
	Program int64 `json:"program"`    // the executable, shared libraries, vdso and the like
}

// readSmaps reads /proc/PID/smaps, telling the program's own mappings by
// /proc/PID/exe. Both need the right to trace the process (status does
// not): run the benchmark as the gateway's user or root.
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
// fields follow as "Name: value" lines, of which only Rss is read. A file
// is the program's (the executable or a shared library) when it is exe or
// any of its mappings is executable, which a data file's never is; lines
// that are neither a header nor a field are skipped.
func parseSmaps(r io.Reader, exe string) (rssParts, error) {
	var p rssParts
	type file struct {
		rss  int64
		exec bool
	}
	files := map[string]*file{}
	var cur *int64 // where the current mapping's Rss goes
	// add adds n bytes (at most 2^50) to *dst.
	add := func(dst *int64, n int64) error {
		if *dst > math.MaxInt64-n {
			return errors.New("Rss adds up to more than an int64")
		}
		*dst += n
		return nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if path, perms, ok := smapsHeader(line); ok {
			exec := perms[2] == 'x'
			anon := path == "" || strings.HasPrefix(path, "[anon:")
			switch {
			case anon && exec:
				cur = &p.Code
			case anon || strings.HasPrefix(path, "[heap]") || strings.HasPrefix(path, "[stack"):
				cur = &p.Data
			case strings.HasPrefix(path, "["): // [vdso], [vvar], [vsyscall]
				cur = &p.Program
			default:
				f := files[path]
				if f == nil {
					f = &file{}
					files[path] = f
				}
				f.exec = f.exec || exec
				cur = &f.rss
			}
			continue
		}
		name, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok || string(name) != "Rss" {
			continue
		}
		f := bytes.Fields(rest)
		if cur == nil || len(f) != 2 || string(f[1]) != "kB" {
			return rssParts{}, fmt.Errorf("%q: an Rss line outside a mapping, or not \"N kB\"", line)
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 || kb > 1<<40 {
			return rssParts{}, fmt.Errorf("Rss: %q is not a size in kB", f[0])
		}
		if err := add(cur, kb<<10); err != nil {
			return rssParts{}, err
		}
	}
	if err := sc.Err(); err != nil {
		return rssParts{}, err
	}
	for path, f := range files {
		dst := &p.Files
		if path == exe || f.exec {
			dst = &p.Program
		}
		if err := add(dst, f.rss); err != nil {
			return rssParts{}, err
		}
	}
	return p, nil
}

// smapsHeader reports whether line is a mapping's header, and returns its
// permissions and its path: the rest of the line after the fifth field,
// as the kernel wrote it (a path may hold blanks), "" for none.
func smapsHeader(line []byte) (path string, perms []byte, ok bool) {
	rest := line
	var fields [5][]byte
	for i := range fields {
		rest = bytes.TrimLeft(rest, " \t")
		end := bytes.IndexAny(rest, " \t")
		if end < 0 {
			end = len(rest)
		}
		fields[i], rest = rest[:end], rest[end:]
	}
	addr, perms := fields[0], fields[1]
	if !bytes.Contains(addr, []byte{'-'}) || bytes.HasSuffix(addr, []byte{':'}) || len(perms) != 4 || len(fields[4]) == 0 {
		return "", nil, false
	}
	for _, c := range addr {
		if c != '-' && !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", nil, false
		}
	}
	return string(bytes.TrimLeft(rest, " \t")), perms, true
}

// userHZ is the unit of /proc/stat's times: USER_HZ, 100 on every Linux
// architecture Go supports (sysconf(_SC_CLK_TCK) needs cgo).
const userHZ = 100

// readSteal reads the time the hypervisor has stolen from cpu since boot,
// from /proc/stat, in USER_HZ ticks.
func readSteal(cpu int) (int64, error) {
	n, err := readSteals([]int{cpu})
	if err != nil {
		return 0, err
	}
	return n[0], nil
}

// parseSteals finds the lines "cpuN user nice system idle iowait irq
// softirq steal ..." of a /proc/stat file for each of cpus and returns their
// steal fields, in the order of cpus.
func parseSteals(r io.Reader, cpus []int) ([]int64, error) {
	out := make([]int64, len(cpus))
	seen := make([]bool, len(cpus))
	found := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() && found < len(cpus) {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		i := slices.IndexFunc(cpus, func(c int) bool { return f[0] == "cpu"+strconv.Itoa(c) })
		if i < 0 || seen[i] {
			continue
		}
		if len(f) < 9 {
			return nil, fmt.Errorf("%s: %d fields, no steal time (Linux before 2.6.11?)", f[0], len(f)-1)
		}
		n, err := strconv.ParseInt(f[8], 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s: steal %q is not a count of ticks", f[0], f[8])
		}
		out[i], seen[i] = n, true
		found++
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if i := slices.Index(seen, false); i >= 0 {
		return nil, fmt.Errorf("no line for cpu%d", cpus[i])
	}
	return out, nil
}

// readCPU returns the CPU time the threads of process pid have run so far:
// the sum of the first field of /proc/PID/task/*/schedstat (nanoseconds on a
// CPU, kept by the scheduler itself, unlike /proc/PID/stat's utime and stime,
// which are counted in ticks). A thread that exits takes its time with it;
// the Go runtime keeps its threads, so over one measurement the sum is what
// the process ran.
func readCPU(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum int64
	read := 0
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(filepath.Join(dir, t.Name())); serr == nil {
				// The thread is there and has no schedstat: a kernel
				// without CONFIG_SCHED_INFO (or a sandbox like gVisor).
				return 0, fmt.Errorf("%s/%s: no schedstat: %w", dir, t.Name(), err)
			}
			continue // the thread has just exited
		}
		if errors.Is(err, syscall.ESRCH) {
			continue // it exited between the open and the read
		}
		if err != nil {
			return 0, err
		}
		ns, err := parseSchedstat(b)
		if err != nil {
			return 0, fmt.Errorf("%s/%s/schedstat: %w", dir, t.Name(), err)
		}
		sum += ns
		read++
	}
	if read == 0 {
		return 0, fmt.Errorf("%s: no thread could be read", dir)
	}
	return time.Duration(sum), nil
}

// parseSchedstat reads the first of /proc/PID/task/TID/schedstat's three
// fields: time on a CPU (ns), time waiting for one (ns), timeslices run.
func parseSchedstat(b []byte) (int64, error) {
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 0, fmt.Errorf("%d fields, want 3 (run ns, wait ns, slices)", len(f))
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || ns < 0 {
		return 0, fmt.Errorf("run time %q is not a count of nanoseconds", f[0])
	}
	return ns, nil
}

// readBackends returns the CPU time so far of each PostgreSQL server process
// that serves database db, by process id: those whose title names it.
// PostgreSQL writes a backend's title over its command line
// ("postgres: 15/main: USER DB [local] idle", the cluster name optional).
func readBackends(db string) (map[int]time.Duration, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int]time.Duration{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !backendOf(b, db) {
			continue // gone, a kernel thread, or another process
		}
		t, err := readCPU(pid)
		if err != nil {
			if _, serr := os.Stat(fmt.Sprintf("/proc/%d", pid)); serr != nil {
				continue // it ended meanwhile
			}
			return nil, err
		}
		out[pid] = t
	}
	return out, nil
}

// backendOf reports whether a /proc/PID/cmdline is a PostgreSQL server
// process's title naming database db as a word.
func backendOf(cmdline []byte, db string) bool {
	title, ok := bytes.CutPrefix(cmdline, []byte("postgres: "))
	if !ok || db == "" {
		return false
	}
	for _, f := range bytes.FieldsFunc(title, func(r rune) bool { return r == ' ' || r == 0 }) {
		if string(f) == db {
			return true
		}
	}
	return false
}
