package badger

import (
	"context"
	"fmt"
	"github.com/modelrelay/modelrelay/store"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
)

// BenchmarkHoldSettle measures hold+settle pairs, the ledger work of one
// relayed call, with and without fsync on every commit: one caller, 8
// callers per CPU spread over 16 accounts, and the same callers on one
// account (the shapes of the PostgreSQL store's benchmark).
func BenchmarkHoldSettle(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v/serial", sync), func(b *testing.B) {
			s := openAt(b, b.TempDir(), "", sync)
			credit(b, s, "acme", 1_000_000*usd)
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				if err := holdSettle(ctx, s, "acme", "req_"+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pairs/s")
		})
		for _, c := range []struct {
			name     string
			accounts int
		}{{"parallel", 16}, {"parallel-one-account", 1}} {
			b.Run(fmt.Sprintf("sync=%v/%s", sync, c.name), func(b *testing.B) {
				s := openAt(b, b.TempDir(), "", sync)
				accounts := int64(c.accounts)
				for a := range accounts {
					credit(b, s, "acct_"+strconv.FormatInt(a, 10), 1_000_000*usd)
				}
				ctx := context.Background()
				var n atomic.Int64
				b.SetParallelism(8) // 8 callers per CPU: concurrent calls, as a gateway has
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := n.Add(1)
						if err := holdSettle(ctx, s, "acct_"+strconv.FormatInt(i%accounts, 10), "req_"+strconv.FormatInt(i, 10)); err != nil {
							b.Error(err) // not Fatal: this is not the benchmark's goroutine
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pairs/s")
			})
		}
	}
}

func holdSettle(ctx context.Context, s *Store, account, id string) error {
	if err := s.Hold(ctx, store.Hold{RequestID: id, Account: account, Model: "m", Route: "r", Amount: 2_000_000}); err != nil {
		return err
	}
	_, err := s.Settle(ctx, store.Settlement{RequestID: id, Charge: 1_234_567,
		Usage: pricing.Usage{InputTokens: 1000, OutputTokens: 200}})
	return err
}

// BenchmarkHoldLatency measures what a relayed call waits for before it
// goes upstream: the time Hold takes, with 8 callers per CPU over 16
// accounts each holding, "calling upstream" for 2 ms and settling. The
// metric is hold-µs, the mean time in Hold; ns/op is mostly the sleep.
func BenchmarkHoldLatency(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) {
			s := openAt(b, b.TempDir(), "", sync)
			const accounts = 16
			for a := range accounts {
				credit(b, s, "acct_"+strconv.Itoa(a), 1_000_000*usd)
			}
			ctx := context.Background()
			var n, inHold atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					account, id := "acct_"+strconv.Itoa(int(i%accounts)), "req_"+strconv.FormatInt(i, 10)
					t0 := time.Now()
					if err := s.Hold(ctx, store.Hold{RequestID: id, Account: account, Model: "m", Route: "r", Amount: 2_000_000}); err != nil {
						b.Error(err)
						return
					}
					inHold.Add(int64(time.Since(t0)))
					time.Sleep(2 * time.Millisecond)
					if _, err := s.Settle(ctx, store.Settlement{RequestID: id, Account: account, Charge: 1_234_567,
						Usage: pricing.Usage{InputTokens: 1000, OutputTokens: 200}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(inHold.Load())/float64(b.N)/1e3, "hold-µs")
		})
	}
}
