package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/fixture"
	"github.com/modelrelay/modelrelay/sdk/sdktest"
)

const fixtures = "../../testdata/plugins/systemone"

func TestFixtures(t *testing.T) { sdktest.Run(t, fixtures) }

// The embedded list is systemone.json as it is on disk (the host's copy).
func TestEmbeddedIsSystemOneJSON(t *testing.T) {
	disk, err := os.ReadFile("systemone.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(disk) != string(prices) {
		t.Fatal("the embedded price list differs from systemone.json")
	}
}

// TestCatalogue checks systemone.json against spec 2.1 and 4.2.7: the three
// typed-question models on systemone, $0.04494 per million input tokens and
// free output on the standard and economy routes, auto_route standard, and
// a reference price above ours with its source.
func TestCatalogue(t *testing.T) {
	models := configured(t).list.Models()
	var ids []string
	for _, m := range models {
		ids = append(ids, m.ID)
		t.Run(m.ID, func(t *testing.T) {
			if !slices.Equal(m.Endpoints, []string{"systemone"}) || m.AutoRoute != "standard" || len(m.Routes) != 2 || m.Description == "" {
				t.Errorf("endpoints %v, auto_route %q, routes %v, description %q", m.Endpoints, m.AutoRoute, m.Routes, m.Description)
			}
			for _, route := range []string{"standard", "economy"} {
				if p := m.Routes[route]; p.Input != 44_940_000 || p.Output != 0 {
					t.Errorf("route %s: input %s, output %s; want 0.04494 and 0", route, p.Input, p.Output)
				}
			}
			if ref := m.Reference; ref == nil || ref.Input <= 44_940_000 {
				t.Errorf("reference price %+v is not above ours", ref)
			}
			if s := m.ReferenceSource; s == nil || s.Kind == "" || s.Name == "" || s.URL == "" || s.VerifiedAt == "" || s.Model == "" {
				t.Errorf("reference_price_source %+v is incomplete", s)
			}
		})
	}
	if !slices.Equal(ids, []string{"sysmodel-1.13.0", "sysmodel-latest", "sysmodel-preview"}) {
		t.Errorf("models %v", ids)
	}
}

// TestHandChecked pins the recorded fixtures' numbers to arithmetic done by
// hand: $0.04494 per million input tokens is 44.94 nano-USD per token, the
// sum rounded up once; output is free. The hold's estimate is the fixture's
// admit.input_tokens (a quarter of the request body's bytes); the charge's
// tokens are the sim's (sim/doc.go): Tokens(s) = ceil(len/4) of the state,
// plus per question Tokens(name) + Tokens(instructions) + Σ Tokens(option).
func TestHandChecked(t *testing.T) {
	tests := []struct {
		file         string
		usage        abi.Usage
		hold, charge int64
	}{
		// State 77 bytes → 20; "shipped" 2; instructions 21 bytes → 6: 28.
		// hold 49 × 44.94 = 2202.06; charge 28 × 44.94 = 1258.32.
		{"noul", abi.Usage{InputTokens: 28}, 2203, 1259},
		// State 100 bytes → 25; refund 2; sentiment 3 + instructions (27
		// bytes) 7 + options positive 2, neutral 2, negative 2; urgency 2 +
		// instructions (22 bytes) 6: 51. hold 95 × 44.94 = 4269.3; charge
		// 51 × 44.94 = 2291.94.
		{"choice-score-noul", abi.Usage{InputTokens: 51}, 4270, 2292},
		// State 42 bytes → 11; drift 2: 13. hold 38 × 44.94 = 1707.72;
		// charge 13 × 44.94 = 584.22.
		{"score-exact-bounds", abi.Usage{InputTokens: 13}, 1708, 585},
		// State 4 × 12,344 bytes → 12,344; q 1: 12,345. hold 12,362 × 44.94
		// = 555,548.28; charge 12,345 × 44.94 = 554,784.3.
		{"input-12345", abi.Usage{InputTokens: 12_345}, 555_549, 554_785},
		// State 98,304 bytes → 24,576; fits 1: 24,577. hold 24,595 × 44.94 =
		// 1,105,299.3; charge 24,577 × 44.94 = 1,104,490.38.
		{"state-at-limit", abi.Usage{InputTokens: 24_577}, 1_105_300, 1_104_491},
		// State 98,340 bytes → 24,585; long 1 + instructions (36 bytes) 9;
		// short 2 + instructions (3 bytes) 1: 24,598. hold 24,629 × 44.94 =
		// 1,106,827.26; charge 24,598 × 44.94 = 1,105,434.12.
		{"state-limit-raised", abi.Usage{InputTokens: 24_598}, 1_106_828, 1_105_435},
	}
	list, err := fixture.Load(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	byFile := map[string]fixture.Fixture{}
	for _, f := range list {
		byFile[strings.TrimSuffix(filepath.Base(f.Path), ".json")] = f
	}
	checked := map[string]bool{}
	for _, tt := range tests {
		checked[tt.file] = true
	}
	for name, f := range byFile {
		if f.Expect.Error == nil && !checked[name] {
			t.Errorf("%s: a priced fixture without a hand-checked row here", name)
		}
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f, ok := byFile[tt.file]
			if !ok {
				t.Fatal("fixture missing")
			}
			if f.Usage == nil || *f.Usage != tt.usage {
				t.Errorf("usage %+v, hand-checked %+v", f.Usage, tt.usage)
			}
			if f.Expect.Hold == nil || *f.Expect.Hold != tt.hold {
				t.Errorf("expect.hold %s, hand-checked %d", show(f.Expect.Hold), tt.hold)
			}
			if f.Expect.Charge == nil || *f.Expect.Charge != tt.charge {
				t.Errorf("expect.charge %s, hand-checked %d", show(f.Expect.Charge), tt.charge)
			}
		})
	}
}

func show(p *int64) string {
	if p == nil {
		return "missing"
	}
	return fmt.Sprint(*p)
}
