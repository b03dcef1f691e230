package main

import (
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

func TestParseParams(t *testing.T) {
	tests := []struct {
		name   string
		params []abi.Param
		want   request
		field  string // the field a 400 names; "" when valid
		msg    string // a substring of its message
	}{
		{name: "nothing", want: request{size: "1024x1024", pinned: true, pixels: 1_048_576, tier: "1K", n: 1}},
		{name: "auto", params: params("size", "auto"), want: request{size: "1024x1024", pinned: true, pixels: 1_048_576, tier: "1K", n: 1}},
		// 1,048,576 px: the top of 1K.
		{name: "1024x1024", params: params("size", "1024x1024"), want: request{size: "1024x1024", pixels: 1_048_576, tier: "1K", n: 1}},
		// 1024 × 1025 = 1,049,600 px: 2K.
		{name: "1024x1025", params: params("size", "1024x1025"), want: request{size: "1024x1025", pixels: 1_049_600, tier: "2K", n: 1}},
		// 2048 × 2048 = 4,194,304 px: the top of 2K.
		{name: "2048x2048", params: params("size", "2048x2048", "n", "3"), want: request{size: "2048x2048", pixels: 4_194_304, tier: "2K", n: 3}},
		{name: "4194304x1", params: params("size", "4194304x1"), want: request{size: "4194304x1", pixels: 4_194_304, tier: "2K", n: 1}},
		{name: "n 128", params: params("n", "128"), want: request{size: "1024x1024", pinned: true, pixels: 1_048_576, tier: "1K", n: 128}},
		{name: "n leading zeros", params: params("n", "007"), want: request{size: "1024x1024", pinned: true, pixels: 1_048_576, tier: "1K", n: 7}},
		{name: "all qualities", params: params("quality", "standard"), want: request{size: "1024x1024", pinned: true, pixels: 1_048_576, tier: "1K", n: 1}},
		{name: "url", params: params("response_format", "url", "stream", "true"), want: request{size: "1024x1024", pinned: true, pixels: 1_048_576, tier: "1K", n: 1}},

		{name: "uppercase X", params: params("size", "1024X1024"), field: "size", msg: `lowercase x, like 1024x1024 (got "1024X1024")`},
		{name: "multiplication sign", params: params("size", "1024×1024"), field: "size", msg: "lowercase x"},
		{name: "two x", params: params("size", "1024x1024x1"), field: "size", msg: "lowercase x"},
		{name: "no height", params: params("size", "1024"), field: "size", msg: "<WIDTH>x<HEIGHT>"},
		{name: "empty", params: params("size", ""), field: "size", msg: "<WIDTH>x<HEIGHT>"},
		{name: "word", params: params("size", "big"), field: "size", msg: "<WIDTH>x<HEIGHT>"},
		{name: "AUTO", params: params("size", "AUTO"), field: "size", msg: "<WIDTH>x<HEIGHT>"},
		{name: "zero width", params: params("size", "0x10"), field: "size", msg: "width must be a positive integer without leading zeros"},
		{name: "zero height", params: params("size", "10x0"), field: "size", msg: "height must be a positive integer without leading zeros"},
		{name: "leading zero", params: params("size", "01024x1024"), field: "size", msg: "without leading zeros"},
		{name: "negative", params: params("size", "-5x5"), field: "size", msg: `width must be a positive integer of decimal digits, like 1024x1024 (got "-5x5")`},
		{name: "plus sign", params: params("size", "+5x5"), field: "size", msg: "decimal digits"},
		{name: "spaces", params: params("size", "1024 x 1024"), field: "size", msg: "decimal digits"},
		{name: "fraction", params: params("size", "1024.5x1024"), field: "size", msg: "decimal digits"},
		{name: "empty width", params: params("size", "x1024"), field: "size", msg: "width"},
		// 2049 × 2048 = 4,196,352 px.
		{name: "just above 2K", params: params("size", "2049x2048"), field: "size", msg: "size 2049x2048 is 4196352 pixels, above the 4194304 pixels (2048x2048)"},
		{name: "4096x4096", params: params("size", "4096x4096"), field: "size", msg: "16777216 pixels"},
		{name: "one dimension too large", params: params("size", "4194305x1"), field: "size", msg: "size width is above the 4194304 pixels"},
		{name: "huge dimension", params: params("size", "1x99999999999999999999999"), field: "size", msg: "size height is above"},
		{name: "long value is cut", params: params("size", strings.Repeat("y", 1000)), field: "size", msg: `(got "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"…)`},
		{name: "n 0", params: params("n", "0"), field: "n", msg: `n must be from 1 to 128 (got "0")`},
		{name: "n 129", params: params("n", "129"), field: "n", msg: `(got "129")`},
		{name: "n negative", params: params("n", "-1"), field: "n", msg: "from 1 to 128"},
		{name: "n huge", params: params("n", "99999999999999999999"), field: "n", msg: "from 1 to 128"},
		{name: "n huge negative", params: params("n", "-99999999999999999999"), field: "n", msg: "from 1 to 128"},
		{name: "n fraction", params: params("n", "2.5"), field: "n", msg: `n must be an integer from 1 to 128 (got "2.5")`},
		{name: "n 2.0", params: params("n", "2.0"), field: "n", msg: "must be an integer"},
		{name: "n exponent", params: params("n", "1e2"), field: "n", msg: "must be an integer"},
		{name: "n plus", params: params("n", "+2"), field: "n", msg: "must be an integer"},
		{name: "n empty", params: params("n", ""), field: "n", msg: "must be an integer"},
		{name: "n minus only", params: params("n", "-"), field: "n", msg: "must be an integer"},
		{name: "bad quality", params: params("quality", "ultra"), field: "quality", msg: `quality must be one of auto, low, medium, high, standard, hd (got "ultra")`},
		{name: "quality case", params: params("quality", "HD"), field: "quality", msg: "one of"},
		{name: "bad response_format", params: params("response_format", "png"), field: "response_format", msg: `one of url, b64_json (got "png")`},
		{name: "bad stream", params: params("stream", "yes"), field: "stream", msg: `stream must be true or false (got "yes")`},
		{name: "size twice", params: params("size", "1024x1024", "size", "2048x2048"), field: "size", msg: "size is given more than once"},
		{name: "n twice", params: params("n", "1", "n", "1"), field: "n", msg: "more than once"},
		// The first bad param in order is the one reported.
		{name: "first error wins", params: params("n", "0", "quality", "ultra"), field: "n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseParams(tt.params)
			if tt.field == "" {
				if err != nil || got != tt.want {
					t.Fatalf("parseParams = %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			if err == nil || err.Code != abi.CodeInvalid || err.Field != tt.field || !strings.Contains(err.Message, tt.msg) {
				t.Fatalf("parseParams error = %+v, want field %q with %q", err, tt.field, tt.msg)
			}
		})
	}
}
