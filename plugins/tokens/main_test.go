package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/sdktest"
)

const fixtures = "../../testdata/plugins/tokens"

func TestFixtures(t *testing.T) { sdktest.Run(t, fixtures) }

// textModels are the text models of docs/api.md#models and the endpoints that serve
// them (4.2).
var textModels = map[string][]string{
	"modela-fable-5-1":       {"chat_completions", "messages"},
	"modela-sonnet-5-5":      {"chat_completions", "messages"},
	"modela-opus-5-5":        {"chat_completions", "messages"},
	"modelb-6-astra":         {"chat_completions", "responses"},
	"modelb-6.1-sol":         {"chat_completions", "responses"},
	"modelc-4.7":             {"chat_completions", "responses"},
	"modeld-5.3-Abliterated": {"chat_completions"},
	"modele-k3":              {"chat_completions"},
	"modelf-flash":           {"chat_completions"},
	"modelf-v4-pro":          {"chat_completions"},
}

func loadList(t *testing.T) []pricing.Model {
	t.Helper()
	var l sdk.PriceList
	if err := l.Configure(prices); err != nil {
		t.Fatalf("tokens.json: %v", err)
	}
	return l.Models()
}

// The embedded list is tokens.json as it is on disk (the host's copy).
func TestEmbeddedIsTokensJSON(t *testing.T) { sdktest.CheckEmbedded(t, "tokens", prices) }

func TestCatalogue(t *testing.T) {
	models := loadList(t)
	if len(models) != len(textModels) {
		t.Errorf("%d models, want the %d text models", len(models), len(textModels))
	}
	for _, m := range models {
		t.Run(m.ID, func(t *testing.T) {
			endpoints, ok := textModels[m.ID]
			if !ok {
				t.Fatal("not a text model of docs/api.md#models")
			}
			if !slices.Equal(m.Endpoints, endpoints) {
				t.Errorf("endpoints %v, want %v", m.Endpoints, endpoints)
			}
			modela := strings.HasPrefix(m.ID, "modela-")
			_, hasEconomy := m.Routes["economy"]
			if hasEconomy == modela {
				t.Errorf("economy route: %v; only non-modela text models have one", hasEconomy)
			}
			wantAuto := "standard"
			if hasEconomy {
				wantAuto = "economy"
			}
			if m.AutoRoute != wantAuto {
				t.Errorf("auto_route %q, want %q", m.AutoRoute, wantAuto)
			}
			if m.ContextWindow <= 0 || m.MaxOutput <= 0 || m.MaxOutput >= m.ContextWindow {
				t.Errorf("context_window %d, max_output %d", m.ContextWindow, m.MaxOutput)
			}
			if m.Description == "" || m.Reference == nil || m.ReferenceSource == nil || m.ReferenceSource.VerifiedAt == "" {
				t.Error("description, reference price and its source are required")
			}
			std := m.Routes["standard"]
			if len(m.Routes) != map[bool]int{true: 2, false: 1}[hasEconomy] {
				t.Errorf("routes %v", m.Routes)
			}
			for name, p := range m.Routes {
				if p.Unit != pricing.PerMillionTokens || p.Input <= 0 || p.Output <= 0 {
					t.Errorf("route %s: %+v", name, p)
				}
				if p.CacheRead > p.Input {
					t.Errorf("route %s: cache_read %s above input %s", name, p.CacheRead, p.Input)
				}
				if lc := p.LongContext; lc != nil && (lc.Input < p.Input || lc.Output < p.Output || lc.MinInputTokens >= m.ContextWindow) {
					t.Errorf("route %s: long context %+v below the base prices or beyond the window", name, *lc)
				}
			}
			// reference > standard > economy, input and output.
			ref := *m.Reference
			if !(ref.Input > std.Input && ref.Output > std.Output) {
				t.Errorf("reference %s/%s not above standard %s/%s", ref.Input, ref.Output, std.Input, std.Output)
			}
			if eco, ok := m.Routes["economy"]; ok && !(std.Input > eco.Input && std.Output > eco.Output) {
				t.Errorf("standard %s/%s not above economy %s/%s", std.Input, std.Output, eco.Input, eco.Output)
			}
			if modela {
				if std.CacheWrite <= std.Input || std.CacheWrite1h <= std.CacheWrite || std.LongContext == nil {
					t.Errorf("modela needs cache_write > input, cache_write_1h > cache_write and long_context: %+v", std)
				}
			} else if std.CacheWrite != 0 || std.CacheWrite1h != 0 {
				t.Errorf("cache writes are billed on the modela models only: %+v", std)
			}
			if m.ID == "modelb-6.1-sol" && std.LongContext == nil {
				t.Error("modelb-6.1-sol needs long_context")
			}
		})
	}
}

// TestHandChecked pins the recorded fixtures' numbers to arithmetic done by
// hand from tokens.json (prices in USD per million tokens; a charge is the
// sum of tokens × price, rounded up once to the nano-USD). The fixtures'
// expectations were written by -update; this test keeps them honest.
func TestHandChecked(t *testing.T) {
	tests := []sdktest.Hand{
		// Token counts follow the sim (sim/doc.go): Tokens(s) = ceil(len/4),
		// 4 more per message; chat/responses cache floor(prompt/2/64)×64 of a
		// prompt of 1024 tokens or more; the reply is 24 words, or the model
		// line plus 64 echoed words for a long prompt. Amounts below are µ$
		// (1 µ$ = 1000 nano-USD); the hold's input estimate is the fixture's
		// admit.input_tokens (a quarter of the request body's bytes).
		//
		// modelb-6-astra economy (0.80 in, 6.40 out). Prompt "What is the
		// price of one token?" = 8+4 = 12. hold 29×0.80 + 200×6.40 = 1303.2;
		// charge 12×0.80 + 24×6.40 = 9.6 + 153.6 = 163.2.
		{File: "chat-plain", Usage: &abi.Usage{InputTokens: 12, OutputTokens: 24}, Hold: 1_303_200, Charge: 163_200},
		// modeld-5.3-Abliterated standard (0.55, 2.20), no max_tokens: the
		// default 4096. hold 22×0.55 + 4096×2.20 = 12.1 + 9011.2; charge
		// 7×0.55 + 24×2.20 = 3.85 + 52.8.
		{File: "chat-default-output", Usage: &abi.Usage{InputTokens: 7, OutputTokens: 24}, Hold: 9_023_300, Charge: 56_650},
		// modelc-4.7 standard (2.70, 13.50, cache read 0.675). Prompt 1254 + 9
		// = 1263, cached floor(1263/128)×64 = 576. hold 1286×2.70 + 1000×13.50
		// = 3472.2 + 13500; charge 687×2.70 + 576×0.675 + 24×13.50 = 1854.9 +
		// 388.8 + 324.
		{File: "chat-cached", Usage: &abi.Usage{InputTokens: 687, CacheReadTokens: 576, OutputTokens: 24}, Hold: 16_972_200, Charge: 2_567_700},
		// modelf-flash economy (0.20, 1.60), usage from the stream's usage
		// chunk. hold 41×0.20 + 500×1.60 = 8.2 + 800; charge 11×0.20 +
		// 24×1.60 = 2.2 + 38.4.
		{File: "chat-stream", Usage: &abi.Usage{InputTokens: 11, OutputTokens: 24}, Hold: 808_200, Charge: 40_600},
		// modele-k3 economy (0.40, 1.70), reply cut at max_tokens 10. hold
		// 42×0.40 + 10×1.70 = 16.8 + 17; charge 12×0.40 + 10×1.70 = 4.8 + 17.
		{File: "chat-stream-length", Usage: &abi.Usage{InputTokens: 12, OutputTokens: 10}, Hold: 33_800, Charge: 21_800},
		// modelf-v4-pro economy above 200000 input: long-context 1.60 in,
		// 9.60 out; cache read stays 0.20. Prompt 220000 + 4, cached
		// floor(220004/128)×64 = 109952. hold 220022×1.60 + 2000×9.60 =
		// 352035.2 + 19200; charge 110052×1.60 + 109952×0.20 + 68×9.60 =
		// 176083.2 + 21990.4 + 652.8.
		{File: "chat-long-context", Usage: &abi.Usage{InputTokens: 110_052, CacheReadTokens: 109_952, OutputTokens: 68}, Hold: 371_235_200, Charge: 198_726_400},
		// modelb-6.1-sol standard (2.20, 13.50). Input 4 (instructions) + 4 +
		// 6 = 14. hold 29×2.20 + 300×13.50 = 63.8 + 4050; charge 14×2.20 +
		// 24×13.50 = 30.8 + 324.
		{File: "responses", Usage: &abi.Usage{InputTokens: 14, OutputTokens: 24}, Hold: 4_113_800, Charge: 354_800},
		// modelb-6-astra standard (1.10, 9, cache read 0.11), usage from
		// response.completed. Input 4 + 1500, cached 704. hold 1519×1.10 +
		// 800×9 = 1670.9 + 7200; charge 800×1.10 + 704×0.11 + 68×9 = 880 +
		// 77.44 + 612.
		{File: "responses-stream", Usage: &abi.Usage{InputTokens: 800, CacheReadTokens: 704, OutputTokens: 68}, Hold: 8_870_900, Charge: 1_569_440},
		// modela-sonnet-5-5 (2.70 in, 13.50 out, 5m write 3.375, 1h write
		// 5.40). The hold prices input at the dearest input-side price, the
		// 1h write: 1047×5.40 + 1024×13.50 = 5653.8 + 13824. The system block
		// (1000 tokens) is written to the 5-minute cache: charge 10×2.70 +
		// 1000×3.375 + 24×13.50 = 27 + 3375 + 324.
		{File: "messages-cache-5m", Usage: &abi.Usage{InputTokens: 10, CacheWriteTokens: 1000, OutputTokens: 24}, Hold: 19_477_800, Charge: 3_726_000},
		// The same request again reads the block at 0.27: 27 + 270 + 324.
		{File: "messages-cache-read", Usage: &abi.Usage{InputTokens: 10, CacheReadTokens: 1000, OutputTokens: 24}, Hold: 19_477_800, Charge: 621_000},
		// modela-opus-5-5 (13.50, 67.50, 1h write 27). hold 2050×27 +
		// 2048×67.50 = 55350 + 138240; charge 11×13.50 + 2000×27 + 24×67.50 =
		// 148.5 + 54000 + 1620.
		{File: "messages-cache-1h", Usage: &abi.Usage{InputTokens: 11, CacheWrite1hTokens: 2000, OutputTokens: 24}, Hold: 193_590_000, Charge: 55_768_500},
		// modela-fable-5-1 (0.90, 4.50, 5m 1.125, 1h 1.80), usage from
		// message_start and message_delta. hold 2070×1.80 + 4000×4.50 = 3726 +
		// 18000; charge 9×0.90 + 500×1.125 + 1500×1.80 + 24×4.50 = 8.1 + 562.5
		// + 2700 + 108.
		{File: "messages-stream", Usage: &abi.Usage{InputTokens: 9, CacheWriteTokens: 500, CacheWrite1hTokens: 1500, OutputTokens: 24}, Hold: 21_726_000, Charge: 3_378_600},
		// modela-sonnet-5-5 above 200000 input: long-context 5.40 in (equal to
		// the 1h write) and 20.25 out. hold 225030×5.40 + 4096×20.25 = 1215162
		// + 82944; charge 225008×5.40 + 24×20.25 = 1215043.2 + 486.
		{File: "messages-long-context", Usage: &abi.Usage{InputTokens: 225_008, OutputTokens: 24}, Hold: 1_298_106_000, Charge: 1_215_529_200},
	}
	sdktest.CheckHand(t, fixtures, tests)
}
