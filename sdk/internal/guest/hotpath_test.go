package guest_test

import (
	"os"
	"testing"

	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/internal/guest"
)

// BenchmarkHotPath runs the tokens plugin's admit and settle (sdk.TokenPlugin
// with plugins/tokens/tokens.json) through the dispatch natively, into one
// reused output buffer as mr_call does; without mr_call's string cache, the
// request's strings are its only allocations.
func BenchmarkHotPath(b *testing.B) {
	prices, err := os.ReadFile("../../../plugins/tokens/tokens.json")
	if err != nil {
		b.Fatal(err)
	}
	defer guest.Reset()()
	sdk.Register(sdk.TokenPlugin("tokens", prices))
	p, _ := guest.Registered()
	if p.Configure != nil {
		if err := p.Configure(nil); err != nil {
			b.Fatal(err)
		}
	}
	admit := (&abi.AdmitRequest{Now: 1, Endpoint: "chat_completions", Model: "modelb-6-astra", Route: "economy", InputTokens: 70, MaxOutputTokens: 256, DefaultOutputTokens: 4096}).AppendTo(nil)
	settle := (&abi.SettleRequest{Now: 1, Endpoint: "chat_completions", Model: "modelb-6-astra", Route: "economy", Usage: abi.Usage{InputTokens: 50, OutputTokens: 24}}).AppendTo(nil)
	var out []byte
	b.Run("admit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out = guest.AppendCall(out[:0], abi.OpAdmit, admit)
		}
	})
	b.Run("settle", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out = guest.AppendCall(out[:0], abi.OpSettle, settle)
		}
	})
}
