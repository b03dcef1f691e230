package postgres

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/modelrelay/modelrelay/store"
)

// BenchmarkHoldSettle measures hold+settle pairs (two statements, two
// commits) from parallel callers, on one account and spread over 64. The
// server's synchronous_commit is reported as a metric (1 = on).
func BenchmarkHoldSettle(b *testing.B) {
	for _, c := range []struct {
		accounts int
		sync     string
	}{{1, "on"}, {64, "on"}, {1, "off"}, {64, "off"}} {
		accounts := c.accounts
		b.Run(fmt.Sprintf("accounts=%d/synchronous_commit=%s", accounts, c.sync), func(b *testing.B) {
			dsn := freshDSN(b)
			u, _ := url.Parse(dsn)
			q := u.Query()
			q.Set("synchronous_commit", c.sync)
			u.RawQuery = q.Encode()
			s := openStore(b, u.String(), Options{RenewEvery: -1})
			ctx := context.Background()
			for a := range accounts {
				if _, err := s.Credit(ctx, fmt.Sprint("acct_", a), 1_000_000*usd, "bench"); err != nil {
					b.Fatal(err)
				}
			}
			var sync string
			if err := s.pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&sync); err != nil {
				b.Fatal(err)
			}
			var n atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					acct := fmt.Sprint("acct_", i%int64(accounts))
					id := fmt.Sprint("req_", i)
					if err := s.Hold(ctx, hold(acct, id, usd/1000)); err != nil {
						b.Error(err)
						return
					}
					if _, err := s.Settle(ctx, store.Settlement{RequestID: id, Account: acct, Charge: usd / 2000}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			if sync == "on" {
				b.ReportMetric(1, "sync_commit")
			} else {
				b.ReportMetric(0, "sync_commit")
			}
		})
	}
}
