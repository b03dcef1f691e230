package main

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/sdktest"
)

func configured(t testing.TB) *plugin {
	t.Helper()
	p := newPlugin(prices)
	if err := p.list.Configure(nil); err != nil {
		t.Fatalf("images.json: %v", err)
	}
	return p
}

var params = sdktest.Params

var pinned = []abi.Param{{Name: "size", Value: "1024x1024"}}

const (
	sunburst = "modelb-image-2.5-sunburst"
	flare    = "modelb-image-2.5-flare"
)

func TestAdmit(t *testing.T) {
	p := configured(t)
	tests := []struct {
		name     string
		endpoint string
		model    string
		route    string
		params   []abi.Param
		hold     int64
		set      []abi.Param
		err      abi.Error // Message is a substring
	}{
		// 1K is $0.03 = 30,000,000 nano; 2K is $0.05 = 50,000,000 nano.
		{name: "size omitted: pinned, 1K × 1", params: nil, hold: 30_000_000, set: pinned},
		{name: "size auto: pinned", params: params("size", "auto"), hold: 30_000_000, set: pinned},
		{name: "1024x1024 sent: not pinned", params: params("size", "1024x1024"), hold: 30_000_000},
		// 1,048,576 px is the top of 1K; 1025×1024 = 1,049,600 px is 2K.
		{name: "top of 1K", params: params("size", "2048x512"), hold: 30_000_000},
		{name: "one pixel row above 1K", params: params("size", "1025x1024"), hold: 50_000_000},
		{name: "small size is 1K", params: params("size", "256x256"), hold: 30_000_000},
		{name: "1x1", params: params("size", "1x1"), hold: 30_000_000},
		// 2K × n=3 = 3 × 50,000,000 = 150,000,000 nano.
		{name: "2K × 3", params: params("size", "2048x2048", "n", "3"), hold: 150_000_000},
		{name: "1536x1024 is 2K", params: params("size", "1536x1024"), hold: 50_000_000},
		// 4,194,304 px is the top of 2K, also as 4096×1024.
		{name: "top of 2K, wide", params: params("size", "4096x1024"), hold: 50_000_000},
		// 1K × 128 = 3,840,000,000; 2K × 128 = 6,400,000,000.
		{name: "n 128, 1K", params: params("n", "128"), hold: 3_840_000_000, set: pinned},
		{name: "n 128, 2K", params: params("n", "128", "size", "2048x2048"), hold: 6_400_000_000},
		{name: "n 1", params: params("n", "1", "size", "512x512"), hold: 30_000_000},
		{name: "every param", params: params("size", "1024x1536", "n", "2", "quality", "hd", "response_format", "b64_json", "stream", "false"), hold: 100_000_000},
		{name: "unknown params ignored", params: params("background", "transparent", "size", "1024x1024"), hold: 30_000_000},
		{name: "image edit", endpoint: "image_edit", model: flare, params: params("size", "1024x1024", "n", "2"), hold: 60_000_000},
		{name: "economy route", route: "economy", params: params("size", "2048x1024"), hold: 50_000_000},

		{name: "uppercase X", params: params("size", "1024X1024"), err: abi.Error{Code: abi.CodeInvalid, Field: "size", Message: "lowercase x"}},
		{name: "zero width", params: params("size", "0x10"), err: abi.Error{Code: abi.CodeInvalid, Field: "size", Message: "without leading zeros"}},
		{name: "negative", params: params("size", "-5x5"), err: abi.Error{Code: abi.CodeInvalid, Field: "size", Message: "width must be a positive integer"}},
		{name: "no height", params: params("size", "1024"), err: abi.Error{Code: abi.CodeInvalid, Field: "size", Message: "<WIDTH>x<HEIGHT>"}},
		{name: "2049x2048 too large", params: params("size", "2049x2048"), err: abi.Error{Code: abi.CodeInvalid, Field: "size", Message: "size 2049x2048 is 4196352 pixels, above the 4194304"}},
		{name: "n 0", params: params("n", "0"), err: abi.Error{Code: abi.CodeInvalid, Field: "n", Message: `n must be from 1 to 128 (got "0")`}},
		{name: "n 129", params: params("n", "129"), err: abi.Error{Code: abi.CodeInvalid, Field: "n", Message: "from 1 to 128"}},
		{name: "bad quality", params: params("quality", "ultra"), err: abi.Error{Code: abi.CodeInvalid, Field: "quality", Message: "auto, low, medium, high, standard, hd"}},
		{name: "endpoint not served", endpoint: "video_generation", err: abi.Error{Code: abi.CodeInvalid, Field: "model", Message: "not served on the video_generation endpoint"}},
		{name: "unknown model", model: "modelb-image-3", err: abi.Error{Code: abi.CodeForbidden, Message: "model modelb-image-3 is not sold here"}},
		{name: "unknown route", route: "premium", err: abi.Error{Code: abi.CodeForbidden, Message: `not sold on route "premium"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := abi.AdmitRequest{Endpoint: "image_generation", Model: sunburst, Route: "standard", Params: tt.params}
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
			if err != nil || res.Hold != tt.hold || !reflect.DeepEqual(res.Set, tt.set) {
				t.Fatalf("admit = %+v, %v; want hold %d, set %v", res, err, tt.hold, tt.set)
			}
		})
	}
}

func TestSettle(t *testing.T) {
	p := configured(t)
	tests := []struct {
		name     string
		endpoint string
		route    string
		params   []abi.Param
		images   int64
		charge   int64
		err      string
	}{
		// The gateway settles with the params after Set: size is present.
		{name: "1K × 1", params: pinned, images: 1, charge: 30_000_000},
		// 2K × 3 = 150,000,000.
		{name: "2K × 3", params: params("size", "2048x2048", "n", "3"), images: 3, charge: 150_000_000},
		// n=4 asked, 2 returned: 2 × 30,000,000.
		{name: "fewer images than n", params: params("size", "1024x1024", "n", "4"), images: 2, charge: 60_000_000},
		// n=2 asked, 5 returned: charged for 2 only, 2 × 50,000,000.
		{name: "more images than n are capped", params: params("size", "1792x1024", "n", "2"), images: 5, charge: 100_000_000},
		{name: "no images, no charge", params: params("size", "2048x2048", "n", "8"), images: 0, charge: 0},
		// Absent size at settle is still 1024x1024 (the same rule as admit).
		{name: "size absent at settle", params: nil, images: 1, charge: 30_000_000},
		{name: "image edit economy", endpoint: "image_edit", route: "economy", params: params("size", "1024x1025"), images: 1, charge: 50_000_000},
		{name: "negative images", params: pinned, images: -1, err: "usage images is negative (-1)"},
		{name: "params that fail admit", params: params("size", "big"), images: 1, err: "the admitted params do not validate"},
		{name: "endpoint not served", endpoint: "chat_completions", params: pinned, images: 1, err: "not served on the chat_completions endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := abi.SettleRequest{Endpoint: "image_generation", Model: flare, Route: "standard", Params: tt.params, Usage: abi.Usage{Images: tt.images}}
			if tt.endpoint != "" {
				req.Endpoint = tt.endpoint
			}
			if tt.route != "" {
				req.Route = tt.route
			}
			res, err := p.settle(req)
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
	const model = `{"models":[{"id":"img","endpoints":[%s],"routes":{"standard":%s}%s}]}`
	good := `{"unit":"per_image","sizes":{"1K":"0.03","2K":"0.05"}}`
	build := func(endpoints, price, extra string) string {
		return fmt.Sprintf(model, endpoints, price, extra)
	}
	tests := []struct {
		name, config, want string
	}{
		{"valid", build(`"image_generation"`, good, ""), ""},
		{"not JSON", "{", "price list"},
		{"text endpoint", build(`"image_generation","chat_completions"`, good, ""), `models[0] (img): endpoints[1]: "chat_completions" is not an image endpoint`},
		{"per-token route", build(`"image_edit"`, `{"unit":"per_million_tokens","input":"1","output":"1"}`, ""), `routes.standard: unit: "per_million_tokens", want "per_image"`},
		{"missing 2K", build(`"image_edit"`, `{"unit":"per_image","sizes":{"1K":"0.03"}}`, ""), `sizes: no price for tier "2K"`},
		{"extra tier", build(`"image_edit"`, `{"unit":"per_image","sizes":{"1K":"0.03","2K":"0.05","4K":"0.09"}}`, ""), `sizes: tier "4K" is not one this plugin charges`},
		{"per-second reference", build(`"image_edit"`, good, `,"reference_price":{"unit":"per_second","resolutions":{"480p":"1"}}`), "reference_price: unit"},
		{"context window", build(`"image_edit"`, good, `,"context_window":1000`), "context_window and max_output do not apply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := configured(t)
			err := p.list.Configure([]byte(tt.config))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := p.list.Model("img"); !ok {
					t.Fatal("the new list was not loaded")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("configure = %v, want %q", err, tt.want)
			}
			if _, ok := p.list.Model(sunburst); !ok {
				t.Fatal("a failed configure dropped the loaded list")
			}
		})
	}
	if err := newPlugin(nil).list.Configure(nil); err == nil || !strings.Contains(err.Error(), "put images.json beside images.wasm") {
		t.Fatalf("no price list at all: %v", err)
	}
}
