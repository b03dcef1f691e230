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
// account (the shapes of the PostgreSQL store's benchmark). The -key
// shapes hold against a key of the account with a monthly limit, as the
// gateway's calls do.
func BenchmarkHoldSettle(b *testing.B) {
	for _, sync := range []bool{false, true} {
		for _, keyed := range []bool{false, true} {
			suffix := ""
			if keyed {
				suffix = "-key"
			}
			b.Run(fmt.Sprintf("sync=%v/serial%s", sync, suffix), func(b *testing.B) {
				s := openAt(b, b.TempDir(), "", sync)
				keyID := benchAccount(b, s, "acme", keyed)
				ctx := context.Background()
				b.ResetTimer()
				start := time.Now()
				for i := range b.N {
					if err := holdSettle(ctx, s, "acme", keyID, "req_"+strconv.Itoa(i)); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pairs/s")
			})
		}
		for _, c := range []struct {
			name     string
			accounts int
			keyed    bool
		}{{"parallel", 16, false}, {"parallel-one-account", 1, false}, {"parallel-key", 16, true}} {
			b.Run(fmt.Sprintf("sync=%v/%s", sync, c.name), func(b *testing.B) {
				s := openAt(b, b.TempDir(), "", sync)
				accounts := int64(c.accounts)
				keys := make([]string, accounts)
				for a := range accounts {
					keys[a] = benchAccount(b, s, "acct_"+strconv.FormatInt(a, 10), c.keyed)
				}
				ctx := context.Background()
				var n atomic.Int64
				b.SetParallelism(8) // 8 callers per CPU: concurrent calls, as a gateway has
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := n.Add(1)
						if err := holdSettle(ctx, s, "acct_"+strconv.FormatInt(i%accounts, 10), keys[i%accounts], "req_"+strconv.FormatInt(i, 10)); err != nil {
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

// benchAccount credits account and, when keyed, gives it a key with a
// monthly limit no benchmark reaches, whose id it returns.
func benchAccount(b *testing.B, s *Store, account string, keyed bool) string {
	credit(b, s, account, 1_000_000*usd)
	if !keyed {
		return ""
	}
	id := "key_" + account
	if err := s.CreateKey(context.Background(), store.Key{ID: id, Hash: store.HashKey("sk-" + account), Account: account,
		Route: store.AutoRoute, Limit: 1_000_000 * usd, Reset: store.ResetMonthly}); err != nil {
		b.Fatal(err)
	}
	return id
}

func holdSettle(ctx context.Context, s *Store, account, keyID, id string) error {
	if err := s.Hold(ctx, store.Hold{RequestID: id, Account: account, KeyID: keyID, Model: "m", Route: "r", Amount: 2_000_000}); err != nil {
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
