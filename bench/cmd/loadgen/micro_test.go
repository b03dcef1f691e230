package main

import (
	"strings"
	"testing"
)

const microOut = `goos: linux
goarch: amd64
pkg: github.com/modelrelay/modelrelay/plugins
cpu: Intel(R) Xeon(R) Processor
BenchmarkCall-2          	   40000	     29000 ns/op	     512 B/op	       9 allocs/op
BenchmarkRequest-2       	   10000	    100000 ns/op	    2048 B/op	      30 allocs/op
BenchmarkRequest-2       	   10000	    120000 ns/op	    2048 B/op	      30 allocs/op
BenchmarkRequest-2       	   10000	    110000 ns/op	    2048 B/op	      30 allocs/op
BenchmarkRequest-2       	   10000	    130000 ns/op	    2048 B/op	      30 allocs/op
PASS
ok  	github.com/modelrelay/modelrelay/plugins	12.3s
pkg: github.com/modelrelay/modelrelay/store
BenchmarkHoldSettle/sync=false/serial-2   	    5000	    210000 ns/op	      4761 pairs/s	   9000 B/op	  100 allocs/op
BenchmarkRequest          	    10	    1 ns/op
--- BENCH: BenchmarkX
    x_test.go:10: a log line
`

func TestParseMicro(t *testing.T) {
	s, err := parseMicro(strings.NewReader(microOut))
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 7 {
		t.Fatalf("%d samples: %+v", len(s), s)
	}
	hs := s[5]
	if hs.Name != "HoldSettle/sync=false/serial" || hs.Procs != 2 || hs.NsOp != 210000 || !strings.HasSuffix(hs.Pkg, "/store") {
		t.Fatalf("hold+settle sample: %+v", hs)
	}
	if last := s[6]; last.Name != "Request" || last.Procs != 0 {
		t.Fatalf("no -N suffix: %+v", last)
	}
	cases := []struct {
		name   string
		pkg    string
		bench  string
		wantNs float64
		wantN  int
		wantOK bool
	}{
		{"even count: mean of the middle two", "/plugins", "Request", 115000, 4, true},
		{"other package not mixed in", "/store", "Request", 1, 1, true},
		{"single sample", "/plugins", "Call", 29000, 1, true},
		{"absent", "/plugins", "Decode", 0, 0, false},
		{"sub-benchmark name is exact", "/store", "HoldSettle", 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns, n, ok := microMedian(s, c.pkg, c.bench)
			if ns != c.wantNs || n != c.wantN || ok != c.wantOK {
				t.Fatalf("microMedian = %v, %d, %v; want %v, %d, %v", ns, n, ok, c.wantNs, c.wantN, c.wantOK)
			}
		})
	}
}

func TestParseMicroRejectsBadValue(t *testing.T) {
	_, err := parseMicro(strings.NewReader("BenchmarkX-2  10  abc ns/op\n"))
	if err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("err = %v", err)
	}
}

func TestMedian(t *testing.T) {
	cases := []struct {
		name string
		in   []float64
		want float64
	}{
		{"one", []float64{3}, 3},
		{"odd", []float64{5, 1, 3}, 3},
		{"even", []float64{4, 1, 3, 2}, 2.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := append([]float64(nil), c.in...)
			if got := median(c.in); got != c.want {
				t.Fatalf("median(%v) = %v, want %v", c.in, got, c.want)
			}
			for i := range in {
				if in[i] != c.in[i] {
					t.Fatal("median reordered its input")
				}
			}
		})
	}
}

func FuzzParseMicro(f *testing.F) {
	f.Add(microOut)
	f.Add("BenchmarkX-2 1 2 ns/op 3 B/op\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := parseMicro(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, x := range s {
			if x.NsOp < 0 || x.Procs < 0 {
				t.Fatalf("bad sample %+v", x)
			}
		}
	})
}
