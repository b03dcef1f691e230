package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// microSample is one result line of `go test -bench` output.
type microSample struct {
	Pkg   string  // from the preceding "pkg:" line
	Name  string  // without the "Benchmark" prefix and the -GOMAXPROCS suffix
	NsOp  float64 // ns/op
	Procs int     // the -N suffix (0 when absent)
}

// parseMicro reads the standard benchmark format (golang.org/design/14313):
// "pkg: PATH" configuration lines and "BenchmarkName-N  iterations  value
// unit [value unit]..." result lines. Lines that are neither are skipped;
// a result line without ns/op is skipped; a malformed value is an error.
func parseMicro(r io.Reader) ([]microSample, error) {
	var out []microSample
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if p, ok := bytes.CutPrefix(line, []byte("pkg: ")); ok {
			pkg = string(bytes.TrimSpace(p))
			continue
		}
		if !bytes.HasPrefix(line, []byte("Benchmark")) {
			continue
		}
		f := strings.Fields(string(line))
		if len(f) < 4 || len(f)%2 != 0 {
			continue // a benchmark's own log line, or a name with no result yet
		}
		if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
			continue
		}
		s := microSample{Pkg: pkg, Name: strings.TrimPrefix(f[0], "Benchmark")}
		if i := strings.LastIndexByte(s.Name, '-'); i > 0 {
			if p, err := strconv.Atoi(s.Name[i+1:]); err == nil && p > 0 {
				s.Name, s.Procs = s.Name[:i], p
			}
		}
		found := false
		for i := 2; i+1 < len(f); i += 2 {
			if f[i+1] != "ns/op" {
				continue
			}
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return nil, fmt.Errorf("line %d: ns/op %q is not a duration", n, f[i])
			}
			s.NsOp, found = v, true
		}
		if found {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

// microMedian is the median ns/op of the samples of one benchmark (name
// without the -N suffix, sub-benchmarks excluded) in any package whose path
// ends in pkgSuffix; ok is false when there is none.
func microMedian(samples []microSample, pkgSuffix, name string) (ns float64, n int, ok bool) {
	var v []float64
	for _, s := range samples {
		if s.Name == name && strings.HasSuffix(s.Pkg, pkgSuffix) {
			v = append(v, s.NsOp)
		}
	}
	if len(v) == 0 {
		return 0, 0, false
	}
	return median(v), len(v), true
}

// median of a non-empty slice (the mean of the two middle values for an
// even count, as benchstat reports it). It sorts a copy.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
