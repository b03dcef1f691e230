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
