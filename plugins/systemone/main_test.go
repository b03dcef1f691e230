package main

import (
	"slices"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/sdktest"
)

const fixtures = "../../testdata/plugins/systemone"

func TestFixtures(t *testing.T) { sdktest.Run(t, fixtures) }

// The embedded list is systemone.json as it is on disk (the host's copy).
func TestEmbeddedIsSystemOneJSON(t *testing.T) { sdktest.CheckEmbedded(t, "systemone", prices) }

// TestCatalogue checks systemone.json against docs/api.md#models and #fees-fixed-by-the-contract: the three
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
	tests := []sdktest.Hand{
		// State 77 bytes → 20; "shipped" 2; instructions 21 bytes → 6: 28.
		// hold 49 × 44.94 = 2202.06; charge 28 × 44.94 = 1258.32.
		{File: "noul", Usage: &abi.Usage{InputTokens: 28}, Hold: 2203, Charge: 1259},
		// State 100 bytes → 25; refund 2; sentiment 3 + instructions (27
		// bytes) 7 + options positive 2, neutral 2, negative 2; urgency 2 +
		// instructions (22 bytes) 6: 51. hold 95 × 44.94 = 4269.3; charge
		// 51 × 44.94 = 2291.94.
		{File: "choice-score-noul", Usage: &abi.Usage{InputTokens: 51}, Hold: 4270, Charge: 2292},
		// State 42 bytes → 11; drift 2: 13. hold 38 × 44.94 = 1707.72;
		// charge 13 × 44.94 = 584.22.
		{File: "score-exact-bounds", Usage: &abi.Usage{InputTokens: 13}, Hold: 1708, Charge: 585},
		// State 4 × 12,344 bytes → 12,344; q 1: 12,345. hold 12,362 × 44.94
		// = 555,548.28; charge 12,345 × 44.94 = 554,784.3.
		{File: "input-12345", Usage: &abi.Usage{InputTokens: 12_345}, Hold: 555_549, Charge: 554_785},
		// State 98,304 bytes → 24,576; fits 1: 24,577. hold 24,595 × 44.94 =
		// 1,105,299.3; charge 24,577 × 44.94 = 1,104,490.38.
		{File: "state-at-limit", Usage: &abi.Usage{InputTokens: 24_577}, Hold: 1_105_300, Charge: 1_104_491},
		// State 98,340 bytes → 24,585; long 1 + instructions (36 bytes) 9;
		// short 2 + instructions (3 bytes) 1: 24,598. hold 24,629 × 44.94 =
		// 1,106,827.26; charge 24,598 × 44.94 = 1,105,434.12.
		{File: "state-limit-raised", Usage: &abi.Usage{InputTokens: 24_598}, Hold: 1_106_828, Charge: 1_105_435},
	}
	sdktest.CheckHand(t, fixtures, tests)
}
