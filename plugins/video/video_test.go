package main

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/sdktest"
)

const model = "modelc-imagine-video-1.5"

func configured(t testing.TB) *plugin {
	t.Helper()
	p := newPlugin(prices)
	if err := p.list.Configure(nil); err != nil {
		t.Fatalf("video.json: %v", err)
	}
	return p
}

var params = sdktest.Params

func TestAdmit(t *testing.T) {
	p := configured(t)
	tests := []struct {
		name     string
		endpoint string
		model    string
		route    string
		params   []abi.Param
		hold     int64
		set      []abi.Param // the effective duration and resolution
		err      abi.Error   // Message is a substring
	}{
		// Per second: 480p $0.05 = 50,000,000 nano; 720p $0.10; 1080p $0.20.
		// Defaults 8 s at 480p: 8 × 50,000,000 = 400,000,000.
		{name: "defaults", hold: 400_000_000, set: params("duration", "8", "resolution", "480p")},
		// 1080p × 15 s = 15 × 200,000,000 = 3,000,000,000.
		{name: "1080p × 15 s", params: params("duration", "15", "resolution", "1080p"), hold: 3_000_000_000, set: params("duration", "15", "resolution", "1080p")},
		// 720p × 10 s = 10 × 100,000,000.
		{name: "720p × 10 s", params: params("resolution", "720p", "duration", "10"), hold: 1_000_000_000, set: params("duration", "10", "resolution", "720p")},
		// 720p, default 8 s: 800,000,000.
		{name: "720p, default duration", params: params("resolution", "720p"), hold: 800_000_000, set: params("duration", "8", "resolution", "720p")},
		// 1 s, default 480p: 50,000,000.
		{name: "1 s, default resolution", params: params("duration", "1"), hold: 50_000_000, set: params("duration", "1", "resolution", "480p")},
		{name: "leading zero normalised", params: params("duration", "08"), hold: 400_000_000, set: params("duration", "8", "resolution", "480p")},
		{name: "unknown params ignored", params: params("aspect_ratio", "16:9", "generate_audio", "true"), hold: 400_000_000, set: params("duration", "8", "resolution", "480p")},
		{name: "economy", route: "economy", params: params("duration", "15", "resolution", "1080p"), hold: 3_000_000_000, set: params("duration", "15", "resolution", "1080p")},

		{name: "duration 0", params: params("duration", "0"), err: abi.Error{Code: abi.CodeInvalid, Field: "duration", Message: `duration must be from 1 to 15 seconds (got "0")`}},
		{name: "duration 16", params: params("duration", "16"), err: abi.Error{Code: abi.CodeInvalid, Field: "duration", Message: `(got "16")`}},
		{name: "duration fraction", params: params("duration", "7.5"), err: abi.Error{Code: abi.CodeInvalid, Field: "duration", Message: "whole number of seconds"}},
		{name: "resolution 4k", params: params("resolution", "4k"), err: abi.Error{Code: abi.CodeInvalid, Field: "resolution", Message: `resolution must be one of 480p, 720p, 1080p (got "4k")`}},
		{name: "endpoint not served", endpoint: "image_generation", err: abi.Error{Code: abi.CodeInvalid, Field: "model", Message: "not served on the image_generation endpoint (it is served on video_generation)"}},
		{name: "unknown model", model: "modelc-imagine-video-2", err: abi.Error{Code: abi.CodeForbidden, Message: "is not sold here"}},
		{name: "unknown route", route: "premium", err: abi.Error{Code: abi.CodeForbidden, Message: `not sold on route "premium"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := abi.AdmitRequest{Endpoint: "video_generation", Model: model, Route: "standard", Params: tt.params}
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
		name       string
		route      string
		params     []abi.Param
		seconds    int64
		resolution string
		charge     int64
		err        string
	}{
		{name: "480p × 8 s", params: params("duration", "8", "resolution", "480p"), seconds: 8, resolution: "480p", charge: 400_000_000},
		// 1080p × 15 s = 3,000,000,000.
		{name: "1080p × 15 s", params: params("duration", "15", "resolution", "1080p"), seconds: 15, resolution: "1080p", charge: 3_000_000_000},
		// 720p × 5 s = 500,000,000.
		{name: "720p × 5 s economy", route: "economy", seconds: 5, resolution: "720p", charge: 500_000_000},
		{name: "job not accepted", params: params("duration", "15", "resolution", "1080p"), seconds: 0, resolution: "", charge: 0},
		// No resolution in the usage: the admitted param, 1080p × 2 s.
		{name: "resolution from the params", params: params("duration", "2", "resolution", "1080p"), seconds: 2, charge: 400_000_000},
		{name: "no resolution anywhere: the default", seconds: 3, charge: 150_000_000},
		{name: "usage resolution wins", params: params("resolution", "480p"), seconds: 1, resolution: "720p", charge: 100_000_000},
		{name: "negative seconds", seconds: -1, resolution: "480p", err: "usage seconds is negative (-1)"},
		{name: "unknown resolution", seconds: 1, resolution: "4k", err: `usage resolution "4k" is not one of 480p, 720p, 1080p`},
		{name: "bad params without usage resolution", params: params("resolution", "4k"), seconds: 1, err: "the admitted params do not validate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := abi.SettleRequest{Endpoint: "video_generation", Model: model, Route: "standard", Params: tt.params,
				Usage: abi.Usage{Seconds: tt.seconds, Resolution: tt.resolution}}
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
	const tmpl = `{"models":[{"id":"vid","endpoints":[%s],"routes":{"standard":%s}%s}]}`
	good := `{"unit":"per_second","resolutions":{"480p":"0.05","720p":"0.1","1080p":"0.2"}}`
	build := func(endpoints, price, extra string) string { return fmt.Sprintf(tmpl, endpoints, price, extra) }
	tests := []struct {
		name, config, want string
	}{
		{"valid", build(`"video_generation"`, good, ""), ""},
		{"not JSON", "[", "price list"},
		{"image endpoint", build(`"video_generation","image_generation"`, good, ""), `models[0] (vid): endpoints[1]: "image_generation" is not the video endpoint`},
		{"per-image route", build(`"video_generation"`, `{"unit":"per_image","sizes":{"1K":"1"}}`, ""), `routes.standard: unit: "per_image", want "per_second"`},
		{"missing 1080p", build(`"video_generation"`, `{"unit":"per_second","resolutions":{"480p":"0.05","720p":"0.1"}}`, ""), `resolutions: no price for "1080p"`},
		{"extra resolution", build(`"video_generation"`, `{"unit":"per_second","resolutions":{"480p":"0.05","720p":"0.1","1080p":"0.2","4k":"1"}}`, ""), `resolutions: "4k" is not one this plugin charges`},
		{"token reference", build(`"video_generation"`, good, `,"reference_price":{"unit":"per_million_tokens","input":"1","output":"1"}`), "reference_price: unit"},
		{"max output", build(`"video_generation"`, good, `,"max_output":10`), "do not apply to a video model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := configured(t)
			err := p.list.Configure([]byte(tt.config))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := p.list.Model("vid"); !ok {
					t.Fatal("the new list was not loaded")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("configure = %v, want %q", err, tt.want)
			}
			if _, ok := p.list.Model(model); !ok {
				t.Fatal("a failed configure dropped the loaded list")
			}
		})
	}
	if err := newPlugin(nil).list.Configure(nil); err == nil || !strings.Contains(err.Error(), "put video.json beside video.wasm") {
		t.Fatalf("no price list at all: %v", err)
	}
}
