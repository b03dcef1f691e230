package plugins

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"
)

func TestZZParallelLatency(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "tokens", "lines")
	h, logs := openDir(t, dir, Config{CallTimeout: 5 * time.Second})
	ctx := context.Background()
	req := tokensAdmit()
	var mu sync.Mutex
	var lat []time.Duration
	type slow struct{ g, i int; d time.Duration; at time.Time }
	var slows []slow
	var wg sync.WaitGroup
	start := time.Now()
	for g := range 2 {
		wg.Go(func() {
			for i := 0; time.Since(start) < 4*time.Second; i++ {
				t0 := time.Now()
				if _, err := h.Admit(ctx, req); err != nil {
					t.Error(err)
					return
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				if d > 10*time.Millisecond {
					slows = append(slows, slow{g, i, d, t0})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	n := len(lat)
	t.Logf("n=%d p50=%v p99=%v p999=%v max=%v", n, lat[n/2], lat[n*99/100], lat[n*999/1000], lat[n-1])
	for _, s := range slows {
		t.Logf("slow: g%d call %d took %v at +%v", s.g, s.i, s.d, s.at.Sub(start))
	}
	t.Log(h.Stats())
	_ = logs
}
