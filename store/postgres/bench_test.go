package postgres

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// BenchmarkHoldSettle measures hold+settle pairs (two statements, two
// commits: the ledger work of one relayed call) in the shapes of the Badger
// store's benchmark: one caller on one account (serial), 8 callers per CPU
// spread over 16 accounts (parallel) and the same callers on one account
// (parallel-one-account), where every statement waits for the account row
// the one before it locked until its commit. Each runs with the session's
// synchronous_commit on (PostgreSQL's default: a commit returns once its WAL
// is flushed) and off. Metrics: pairs/s; hold-µs and settle-µs, the mean
// time a caller spent in each statement; sync_commit, what the server
// reported (1 = on).
func BenchmarkHoldSettle(b *testing.B) {
	for _, sync := range []string{"on", "off"} {
		for _, c := range []struct {
			name     string
			accounts int
			parallel bool
		}{{"serial", 1, false}, {"parallel", 16, true}, {"parallel-one-account", 1, true}} {
			b.Run(fmt.Sprintf("synchronous_commit=%s/%s", sync, c.name), func(b *testing.B) {
				benchHoldSettle(b, sync, c.accounts, c.parallel, false)
			})
		}
	}
}

// BenchmarkHoldSettleKeyed is BenchmarkHoldSettle's shapes with
// synchronous_commit on, each call naming a key of its account with a
// monthly spend limit it never reaches (BenchmarkHoldSettle's calls name a
// key that does not exist): what the key's row adds to each hold and
// settle.
func BenchmarkHoldSettleKeyed(b *testing.B) {
	for _, c := range []struct {
		name     string
		accounts int
		parallel bool
	}{{"serial", 1, false}, {"parallel", 16, true}, {"parallel-one-account", 1, true}} {
		b.Run(c.name, func(b *testing.B) { benchHoldSettle(b, "on", c.accounts, c.parallel, true) })
	}
}

func benchHoldSettle(b *testing.B, sync string, accounts int, parallel, keyed bool) {
	s := openBenchStore(b, sync, accounts, keyed)
	ctx := context.Background()
	keyOf := func(int) string { return "key_b" }
	if keyed {
		keyOf = func(a int) string { return "key_acct_" + strconv.Itoa(a) }
	}
	var n, inHold, inSettle atomic.Int64
	pair := func() error {
		i := n.Add(1)
		a := int(i % int64(accounts))
		account, id := "acct_"+strconv.Itoa(a), "req_"+strconv.FormatInt(i, 10)
		t0 := time.Now()
		if err := s.Hold(ctx, store.Hold{RequestID: id, Account: account, KeyID: keyOf(a), Model: "m", Route: "r",
			Endpoint: pricing.EndpointChat, Amount: 2_000_000}); err != nil {
			return err
		}
		t1 := time.Now()
		if _, err := s.Settle(ctx, store.Settlement{RequestID: id, Account: account, Charge: 1_234_567,
			Usage: pricing.Usage{InputTokens: 1000, OutputTokens: 200}}); err != nil {
			return err
		}
		inHold.Add(int64(t1.Sub(t0)))
		inSettle.Add(int64(time.Since(t1)))
		return nil
	}
	b.ResetTimer()
	if parallel {
		b.SetParallelism(8) // 8 callers per CPU, within the pool's 16 connections on two CPUs
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := pair(); err != nil {
					b.Error(err) // not Fatal: this is not the benchmark's goroutine
					return
				}
			}
		})
	} else {
		for range b.N {
			if err := pair(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	b.ReportMetric(float64(inHold.Load())/float64(b.N)/1e3, "hold-µs")
	b.ReportMetric(float64(inSettle.Load())/float64(b.N)/1e3, "settle-µs")
	on := 0.0
	if sync == "on" {
		on = 1
	}
	b.ReportMetric(on, "sync_commit")
}

// openBenchStore opens a fresh store whose sessions run with
// synchronous_commit set to sync (and checks that they do), with accounts
// accounts acct_0… of a million USD each and, if keyed, a key of each,
// key_acct_0…, limited to a million USD a month.
func openBenchStore(b *testing.B, sync string, accounts int, keyed bool) *Store {
	b.Helper()
	u, err := url.Parse(freshDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	q := u.Query()
	q.Set("synchronous_commit", sync)
	u.RawQuery = q.Encode()
	s := openStore(b, u.String(), Options{RenewEvery: -1})
	ctx := context.Background()
	for a := range accounts {
		account := "acct_" + strconv.Itoa(a)
		if _, err := s.Credit(ctx, account, 1_000_000*usd, "bench"); err != nil {
			b.Fatal(err)
		}
		if keyed {
			k := store.Key{ID: "key_" + account, Hash: store.HashKey("bench-" + account), Account: account, Route: store.AutoRoute,
				Limit: 1_000_000 * usd, Reset: store.ResetMonthly}
			if err := s.CreateKey(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
	}
	var got string
	if err := s.pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&got); err != nil {
		b.Fatal(err)
	}
	if got != sync {
		b.Fatalf("synchronous_commit is %q, want %q", got, sync)
	}
	return s
}
