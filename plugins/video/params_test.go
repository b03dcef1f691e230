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
		{name: "defaults", want: request{duration: 8, resolution: "480p"}},
		{name: "1 s", params: params("duration", "1"), want: request{duration: 1, resolution: "480p"}},
		{name: "15 s", params: params("duration", "15"), want: request{duration: 15, resolution: "480p"}},
		{name: "720p", params: params("resolution", "720p"), want: request{duration: 8, resolution: "720p"}},
		{name: "1080p", params: params("resolution", "1080p", "duration", "3"), want: request{duration: 3, resolution: "1080p"}},
		{name: "other params ignored", params: params("aspect_ratio", "16:9", "duration", "2"), want: request{duration: 2, resolution: "480p"}},

		{name: "duration 0", params: params("duration", "0"), field: "duration", msg: `duration must be from 1 to 15 seconds (got "0")`},
		{name: "duration 16", params: params("duration", "16"), field: "duration", msg: `(got "16")`},
		{name: "duration negative", params: params("duration", "-3"), field: "duration", msg: "from 1 to 15"},
		{name: "duration huge", params: params("duration", "100000000000000000000"), field: "duration", msg: "from 1 to 15"},
		{name: "duration fraction", params: params("duration", "7.5"), field: "duration", msg: `duration must be a whole number of seconds from 1 to 15 (got "7.5")`},
		{name: "duration 8.0", params: params("duration", "8.0"), field: "duration", msg: "whole number"},
		{name: "duration text", params: params("duration", "eight"), field: "duration", msg: "whole number"},
		{name: "duration empty", params: params("duration", ""), field: "duration", msg: "whole number"},
		{name: "duration unit", params: params("duration", "8s"), field: "duration", msg: "whole number"},
		{name: "duration twice", params: params("duration", "8", "duration", "9"), field: "duration", msg: "duration is given more than once"},
		{name: "resolution 4k", params: params("resolution", "4k"), field: "resolution", msg: `resolution must be one of 480p, 720p, 1080p (got "4k")`},
		{name: "resolution case", params: params("resolution", "1080P"), field: "resolution", msg: "one of"},
		{name: "resolution pixels", params: params("resolution", "1920x1080"), field: "resolution", msg: "one of"},
		{name: "resolution empty", params: params("resolution", ""), field: "resolution", msg: `(got "")`},
		{name: "resolution twice", params: params("resolution", "480p", "resolution", "480p"), field: "resolution", msg: "more than once"},
		{name: "long value is cut", params: params("resolution", strings.Repeat("p", 500)), field: "resolution", msg: `pppp"…)`},
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
