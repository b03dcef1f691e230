package pricing

import "testing"

func TestEstimateTokens(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want int64
	}{{-1, 0}, {0, 0}, {1, 1}, {3, 1}, {4, 1}, {5, 2}, {8, 2}, {1 << 20, 1 << 18}, {4001, 1001}} {
		if got := EstimateTokens(tt.n); got != tt.want {
			t.Errorf("EstimateTokens(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}
