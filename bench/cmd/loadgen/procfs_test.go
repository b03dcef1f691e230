package main

import (
	"os"
	"strings"
	"testing"
)

func TestParseMemStatus(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    memStatus
		wantErr string
	}{
		{"linux", "Name:\trelay\nVmPeak:\t 2000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nRssAnon:\t   30000 kB\nRssFile:\t   10960 kB\nThreads:\t9\n",
			memStatus{RSS: 40960 << 10, HWM: 51200 << 10, Anon: 30000 << 10, File: 10960 << 10}, ""},
		{"old kernel without RssAnon", "VmHWM:\t2 kB\nVmRSS:\t1 kB\n", memStatus{RSS: 1 << 10, HWM: 2 << 10}, ""},
		{"bad RssFile", "VmRSS:\t1 kB\nVmHWM:\t1 kB\nRssFile:\t1\n", memStatus{}, "RssFile"},
		{"zero", "VmRSS:\t0 kB\nVmHWM:\t0 kB\n", memStatus{}, ""},
		{"missing HWM", "VmRSS:\t1 kB\n", memStatus{}, "missing"},
		{"kernel thread", "Name:\tkthreadd\nState:\tS\n", memStatus{}, "missing"},
		{"wrong unit", "VmRSS:\t1 MB\nVmHWM:\t1 kB\n", memStatus{}, "VmRSS"},
		{"not a number", "VmRSS:\t1 kB\nVmHWM:\tx kB\n", memStatus{}, "VmHWM"},
		{"negative", "VmRSS:\t-1 kB\nVmHWM:\t1 kB\n", memStatus{}, "VmRSS"},
		{"extra field", "VmRSS:\t1 2 kB\nVmHWM:\t1 kB\n", memStatus{}, "VmRSS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseMemStatus(strings.NewReader(c.in))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestReadMemStatusSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	m, err := readMemStatus(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.HWM < m.RSS {
		t.Fatalf("implausible: %+v", m)
	}
	if _, err := readMemStatus(-1); err == nil {
		t.Fatal("pid -1 read")
	}
}

func FuzzParseMemStatus(f *testing.F) {
	f.Add("VmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\n")
	f.Add("VmRSS:\t1 kB\nVmHWM:\t99999999999999999 kB\n")
	f.Fuzz(func(t *testing.T, in string) {
		m, err := parseMemStatus(strings.NewReader(in))
		if err == nil && (m.RSS < 0 || m.HWM < 0 || m.Anon < 0 || m.File < 0) {
			t.Fatalf("negative size %+v from %q", m, in)
		}
	})
}

// smapsSample is a shortened /proc/PID/smaps of a gateway: its program, a
// heap arena, wazero's code, a ledger table, the hold log, a library and
// the vdso; then data files whose paths hold ".so" and blanks, and named
// anonymous mappings.
const smapsSample = `00400000-01c00000 r-xp 00000000 fd:01 1234                               /opt/relay/bin/relay
Size:              24576 kB
Rss:                6716 kB
Pss:                6716 kB
VmFlags: rd ex mr mw me
01c00000-02000000 r--p 01800000 fd:01 1234                               /opt/relay/bin/relay
Rss:                1000 kB
c000000000-c004000000 rw-p 00000000 00:00 0
Size:              65536 kB
Rss:               40000 kB
7f0000000000-7f0000e00000 r-xp 00000000 00:00 0
Rss:               14336 kB
7f0001000000-7f0001100000 rw-s 00000000 fd:01 99                         /var/lib/relay/ledger/000089.sst
Rss:                 512 kB
7f0002000000-7f0002100000 rw-s 00000000 fd:01 98                         /var/lib/relay/ledger/holds/segment 0001.log
Rss:                 256 kB
7f0003000000-7f0003100000 r-xp 00000000 fd:01 97                         /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 800 kB
7f0003100000-7f0003110000 r--p 00100000 fd:01 97                         /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                  40 kB
7f0004000000-7f0004100000 rw-s 00000000 fd:01 96                         /tmp/relay-bench.soA1b2/data/ledger/000001.sst
Rss:                 128 kB
7f0005000000-7f0005100000 rw-s 00000000 fd:01 95                         /tmp/my  data/hold log
Rss:                  64 kB
VmFlags: rd wr sh mr mw me ms sd
7f0006000000-7f0006100000 r-xp 00000000 00:00 0                          [anon:jit code]
Rss:                 100 kB
THPeligible:    0
7f0007000000-7f0007100000 rw-p 00000000 00:00 0                          [anon: Go: heap]
Rss:                 200 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
Rss:                  20 kB
7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0                          [vdso]
Rss:                   8 kB
`

func TestParseSmaps(t *testing.T) {
	got, err := parseSmaps(strings.NewReader(smapsSample), "/opt/relay/bin/relay")
	if err != nil {
		t.Fatal(err)
	}
	want := rssParts{Data: (40000 + 20 + 200) << 10, Code: (14336 + 100) << 10, Files: (512 + 256 + 128 + 64) << 10, Program: (6716 + 1000 + 800 + 40 + 8) << 10}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for _, bad := range []string{
		"Rss: 4 kB\n", // before any mapping
		"00400000-01c00000 r-xp 00000000 fd:01 1234 /x\nRss: 4 MB\n",
		"00400000-01c00000 r-xp 00000000 fd:01 1234 /x\nRss: -4 kB\n",
	} {
		if _, err := parseSmaps(strings.NewReader(bad), "/x"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// A line the parser does not know (a future field without a colon) is
	// skipped, not an error that would drop the whole table.
	got, err = parseSmaps(strings.NewReader("garbage line\n"+smapsSample), "/opt/relay/bin/relay")
	if err != nil || got != want {
		t.Fatalf("with an unknown line: %+v, %v", got, err)
	}
}

// TestReadSmapsSelf: the parts of this process's resident set add up to
// about its VmRSS (they are read a moment apart), and the test binary's own
// text counts as the program.
func TestReadSmapsSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/smaps"); err != nil {
		t.Skip("no /proc/self/smaps")
	}
	m, err := readMemStatus(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	p, err := readSmaps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	sum := p.Data + p.Code + p.Files + p.Program
	if diff := sum - m.RSS; diff < -m.RSS/4 || diff > m.RSS/4 {
		t.Fatalf("parts %+v add up to %d, VmRSS %d", p, sum, m.RSS)
	}
	if p.Program <= 0 || p.Data <= 0 {
		t.Fatalf("no program text or no data in %+v", p)
	}
}

func FuzzParseSmaps(f *testing.F) {
	f.Add(smapsSample)
	f.Fuzz(func(t *testing.T, in string) {
		p, err := parseSmaps(strings.NewReader(in), "/opt/relay/bin/relay")
		if err == nil && (p.Data < 0 || p.Code < 0 || p.Files < 0 || p.Program < 0) {
			t.Fatalf("negative size %+v from %q", p, in)
		}
	})
}

func TestParseSteal(t *testing.T) {
	const stat = "cpu  4812912 4698 601186 4616124 32326 0 112516 173678 0 0\n" +
		"cpu0 2251445 2316 279274 2484707 19071 0 45334 92246 0 0\n" +
		"cpu1 2561467 2382 321912 2131416 13254 0 67181 81432 0 0\n" +
		"cpu10 1 2 3 4 5 6 7 99 0 0\n" +
		"intr 12345\n"
	for cpu, want := range map[int]int64{0: 92246, 1: 81432, 10: 99} {
		got, err := parseSteals(strings.NewReader(stat), []int{cpu})
		if err != nil || got[0] != want {
			t.Errorf("cpu%d: %v, %v; want %d", cpu, got, err, want)
		}
	}
	for name, c := range map[string]struct {
		stat string
		cpu  int
	}{
		"no such cpu":  {stat, 2},
		"too old":      {"cpu0 1 2 3 4 5 6 7\n", 0},
		"not a number": {"cpu0 1 2 3 4 5 6 7 x\n", 0},
		"negative":     {"cpu0 1 2 3 4 5 6 7 -1\n", 0},
	} {
		if n, err := parseSteals(strings.NewReader(c.stat), []int{c.cpu}); err == nil {
			t.Errorf("%s: %v, no error", name, n)
		}
	}
}

func TestReadStealSelf(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat")
	}
	n, err := readSteal(0)
	if err != nil || n < 0 {
		t.Fatalf("cpu0 steal %d, %v", n, err)
	}
}
