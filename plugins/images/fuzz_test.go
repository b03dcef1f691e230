package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

// FuzzParams: whatever the client sent as size, n and quality, parseParams
// either accepts a request within the documented bounds, with the tier its
// pixel count implies, or refuses it with a 400 naming one of the params;
// and admit's hold is then the tier's price × n.
func FuzzParams(f *testing.F) {
	for _, s := range []string{"", "auto", "1024x1024", "1024X1024", "0x10", "-5x5", "1024", "2049x2048", "4194304x1", "1x01", "x", "1024x1024x1"} {
		f.Add(true, s, "1", "hd")
	}
	f.Add(false, "", "128", "auto")
	f.Add(true, "2048x2048", "129", "")
	f.Add(true, "512x512", "-0", "low")
	f.Add(true, "512x512", "99999999999999999999", "low")
	p := configured(f)
	f.Fuzz(func(t *testing.T, hasSize bool, size, n, quality string) {
		var list []abi.Param
		if hasSize {
			list = append(list, abi.Param{Name: "size", Value: size})
		}
		list = append(list, abi.Param{Name: "n", Value: n})
		if quality != "" {
			list = append(list, abi.Param{Name: "quality", Value: quality})
		}
		r, err := parseParams(list)
		if err != nil {
			if err.Code != abi.CodeInvalid || (err.Field != "size" && err.Field != "n" && err.Field != "quality") || err.Message == "" {
				t.Fatalf("error %+v", err)
			}
			if len(err.Message) > 300 {
				t.Fatalf("error message of %d bytes", len(err.Message))
			}
			return
		}
		if r.n < 1 || r.n > 128 {
			t.Fatalf("n %d accepted", r.n)
		}
		if want, _ := strconv.ParseInt(n, 10, 64); want != r.n {
			t.Fatalf("n %q parsed as %d", n, r.n)
		}
		if r.pinned != (!hasSize || size == "auto") || (!r.pinned && r.size != size) {
			t.Fatalf("size %q (given %v) → %+v", size, hasSize, r)
		}
		w, h, ok := strings.Cut(r.size, "x")
		wi, _ := strconv.ParseInt(w, 10, 64)
		hi, _ := strconv.ParseInt(h, 10, 64)
		if !ok || wi < 1 || hi < 1 || strconv.FormatInt(wi, 10) != w || strconv.FormatInt(hi, 10) != h || wi*hi != r.pixels {
			t.Fatalf("size %q accepted as %+v", r.size, r)
		}
		switch {
		case r.pixels <= 1<<20 && r.tier == "1K":
		case r.pixels > 1<<20 && r.pixels <= 1<<22 && r.tier == "2K":
		default:
			t.Fatalf("%d pixels priced at tier %q", r.pixels, r.tier)
		}
		res, aerr := p.admit(abi.AdmitRequest{Endpoint: "image_generation", Model: sunburst, Route: "standard", Params: list})
		perImage := map[string]int64{"1K": 30_000_000, "2K": 50_000_000}[r.tier]
		if aerr != nil || res.Hold != perImage*r.n {
			t.Fatalf("admit = %+v, %v; want %d × %d", res, aerr, perImage, r.n)
		}
	})
}
