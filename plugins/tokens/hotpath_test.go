package main

import (
	"testing"

	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

func BenchmarkHotPath(b *testing.B) {
	p, _ := sdk.Registered()
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
			out = sdk.AppendCall(out[:0], abi.OpAdmit, admit)
		}
	})
	b.Run("settle", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out = sdk.AppendCall(out[:0], abi.OpSettle, settle)
		}
	})
}
