package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/sdktest"
)

func configured(t testing.TB) *plugin {
	t.Helper()
	p := newPlugin(prices)
	if err := p.list.Configure(nil); err != nil {
		t.Fatalf("systemone.json: %v", err)
	}
	return p
}

func TestAdmit(t *testing.T) {
	p := configured(t)
	ok := state(100).q("q", "type=noul")
	tests := []struct {
		name     string
		endpoint string
		model    string
		route    string
		input    int64
		params   []abi.Param
		hold     int64
		err      abi.Error // Message is a substring
	}{
		// $0.04494 per 1M input tokens = 44,940,000 nano-USD per 1M, so
		// 44.94 nano-USD per token; the sum is rounded up once.
		// 12,345 × 44.94 = 554,784.3 → 554,785.
		{name: "12,345 tokens", input: 12_345, params: ok, hold: 554_785},
		// 1 × 44.94 → 45.
		{name: "one token rounds up", input: 1, params: ok, hold: 45},
		// 1,000,000 × 44.94 = 44,940,000 exactly.
		{name: "one million tokens", input: 1_000_000, params: ok, hold: 44_940_000},
		{name: "zero", input: 0, params: ok, hold: 0},
		// 100,000 × 44.94 = 4,494,000.
		{name: "economy, preview", model: "sysmodel-preview", route: "economy", input: 100_000, params: ok, hold: 4_494_000},
		{name: "latest", model: "sysmodel-latest", input: 3, params: ok, hold: 135}, // 134.82

		{name: "bad type", input: 10, params: state(1).q("q", "type=maybe"), err: abi.Error{Code: abi.CodeInvalid, Field: "questions.q.type", Message: `(got "maybe")`}},
		{name: "state too long", input: 10, params: state(40000).q("q", "type=noul"), err: abi.Error{Code: abi.CodeInvalid, Field: "state", Message: "about 40000 tokens"}},
		{name: "endpoint not served", endpoint: "chat_completions", params: ok, err: abi.Error{Code: abi.CodeInvalid, Field: "model", Message: "not served on the chat_completions endpoint (it is served on systemone)"}},
		{name: "unknown model", model: "sysmodel-2", params: ok, err: abi.Error{Code: abi.CodeForbidden, Message: "model sysmodel-2 is not sold here"}},
		{name: "unknown route", route: "premium", params: ok, err: abi.Error{Code: abi.CodeForbidden, Message: `not sold on route "premium" (its routes: economy, standard)`}},
		// The route is checked before the params.
		{name: "route before params", route: "premium", params: state(1), err: abi.Error{Code: abi.CodeForbidden}},
		{name: "negative estimate", input: -1, params: ok, err: abi.Error{Code: abi.CodeInternal, Message: "input token estimate is negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := abi.AdmitRequest{Endpoint: "systemone", Model: "sysmodel-1.13.0", Route: "standard", InputTokens: tt.input, DefaultOutputTokens: 4096, Params: tt.params}
			if tt.endpoint != "" {
				req.Endpoint = tt.endpoint
			}
			if tt.model != "" {
				req.Model = tt.model
			}
			if tt.route != "" {
				req.Route = tt.route
			}
			res, err := p.admit(req)
			if tt.err.Code != "" {
				if !sdktest.IsError(err, tt.err) {
					t.Fatalf("admit error = %#v, want %+v", err, tt.err)
				}
				return
			}
			if err != nil || res.Hold != tt.hold || res.Set != nil {
				t.Fatalf("admit = %+v, %v; want hold %d", res, err, tt.hold)
			}
		})
	}
}

func TestSettle(t *testing.T) {
	p := configured(t)
	tests := []struct {
		name   string
		model  string
		usage  abi.Usage
		charge int64
		err    string
	}{
		// 12,345 × 44.94 nano = 554,784.3 → 554,785.
		{name: "12,345 input tokens", usage: abi.Usage{InputTokens: 12_345}, charge: 554_785},
		// Output is free: 7 × 44.94 = 314.58 → 315.
		{name: "output is free", usage: abi.Usage{InputTokens: 7, OutputTokens: 1_000_000}, charge: 315},
		// 32,770 × 44.94 = 1,472,683.8 → 1,472,684.
		{name: "a full state", model: "sysmodel-preview", usage: abi.Usage{InputTokens: 32_770}, charge: 1_472_684},
		{name: "no usage", usage: abi.Usage{}, charge: 0},
		{name: "negative usage", usage: abi.Usage{InputTokens: -1}, err: "usage input_tokens is negative"},
		{name: "unknown model", model: "sysmodel-0", err: "model sysmodel-0 is not sold here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := abi.SettleRequest{Endpoint: "systemone", Model: "sysmodel-latest", Route: "economy", Usage: tt.usage}
			if tt.model != "" {
				req.Model = tt.model
			}
			res, err := p.Plugin().Settle(req)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("settle error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || res.Charge != tt.charge {
				t.Fatalf("settle = %+v, %v; want %d", res, err, tt.charge)
			}
		})
	}
}

func TestConfigure(t *testing.T) {
	const tmpl = `{"models":[{"id":"sys","endpoints":[%s],"routes":{"standard":%s}%s}]}`
	good := `{"unit":"per_million_tokens","input":"0.04494","output":"0"}`
	build := func(endpoints, price, extra string) string { return fmt.Sprintf(tmpl, endpoints, price, extra) }
	tests := []struct {
		name, config, want string
	}{
		{"valid", build(`"systemone"`, good, ""), ""},
		{"not JSON", "{]", "price list"},
		{"chat endpoint", build(`"systemone","chat_completions"`, good, ""), `models[0] (sys): endpoints[1]: "chat_completions" is not the typed-question endpoint`},
		{"per-request route", build(`"systemone"`, `{"unit":"per_request","unit_price":"0.01"}`, ""), `routes.standard: unit: "per_request", want "per_million_tokens"`},
		{"paid output", build(`"systemone"`, `{"unit":"per_million_tokens","input":"0.04494","output":"0.1"}`, ""), "output: 0.1, want 0 (typed-question output is free)"},
		{"cache read", build(`"systemone"`, `{"unit":"per_million_tokens","input":"0.04494","output":"0","cache_read":"0.01"}`, ""), "cache and long_context prices do not apply"},
		{"long context", build(`"systemone"`, `{"unit":"per_million_tokens","input":"0.04494","output":"0","long_context":{"min_input_tokens":1000,"input":"1","output":"0"}}`, ""), "cache and long_context"},
		{"reference with output", build(`"systemone"`, good, `,"reference_price":{"unit":"per_million_tokens","input":"1","output":"1"}`), "reference_price: output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := configured(t)
			err := p.list.Configure([]byte(tt.config))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := p.list.Model("sys"); !ok {
					t.Fatal("the new list was not loaded")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("configure = %v, want %q", err, tt.want)
			}
			if _, ok := p.list.Model("sysmodel-latest"); !ok {
				t.Fatal("a failed configure dropped the loaded list")
			}
		})
	}
	if err := newPlugin(nil).list.Configure(nil); err == nil || !strings.Contains(err.Error(), "put systemone.json beside systemone.wasm") {
		t.Fatalf("no price list at all: %v", err)
	}
}
