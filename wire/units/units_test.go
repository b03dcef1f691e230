package units

import (
	"math"
	"testing"
)

func TestTotalInputTokens(t *testing.T) {
	tests := []struct {
		name string
		u    Usage
		want int64
	}{
		{"zero", Usage{}, 0},
		{"every kind, output excluded", Usage{InputTokens: 1, CacheReadTokens: 20, CacheWriteTokens: 300, CacheWrite1hTokens: 4000, OutputTokens: 50_000}, 4321},
		{"saturates high", Usage{InputTokens: math.MaxInt64, CacheReadTokens: 1}, math.MaxInt64},
		{"saturates low", Usage{InputTokens: math.MinInt64, CacheReadTokens: -1}, math.MinInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.u.TotalInputTokens(); got != tt.want {
				t.Fatalf("TotalInputTokens = %d, want %d", got, tt.want)
			}
		})
	}
}
