package badger

import (
	"context"
	"errors"
	"github.com/modelrelay/modelrelay/store"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
)

func TestJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	credit(t, b, "acme", usd)
	job := store.Job{RequestID: "vid_1", Account: "acme", KeyID: "key_a", Model: "video-1", Route: "r", Line: "sim", Amount: 500_000_000}
	if err := b.PutJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	got, err := b.Job(ctx, "vid_1")
	if err != nil {
		t.Fatal(err)
	}
	job.Created = got.Created
	if got != job || got.Created.IsZero() {
		t.Errorf("Job:\n got %+v\nwant %+v", got, job)
	}
	refused := []struct {
		name    string
		job     store.Job
		wantErr error
		wantMsg string
	}{
		{"duplicate", store.Job{RequestID: "vid_1", Account: "acme", Amount: 1}, store.ErrExists, "vid_1"},
		{"unknown account", store.Job{RequestID: "vid_2", Account: "nobody", Amount: 1}, store.ErrNotFound, "nobody"},
		{"negative amount", store.Job{RequestID: "vid_2", Account: "acme", Amount: -1}, nil, "amount -1 nano-USD is negative"},
		{"empty id", store.Job{Account: "acme", Amount: 1}, nil, "job request id is empty"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			err := b.PutJob(ctx, tc.job)
			if err == nil {
				t.Fatal("PutJob succeeded")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("PutJob: %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("PutJob error %q does not contain %q", err, tc.wantMsg)
			}
		})
	}
	if _, err := b.Job(ctx, "vid_unknown"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Job of an unknown id: %v", err)
	}
	if _, err := b.RefundJob(ctx, "vid_unknown", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RefundJob of an unknown id: %v", err)
	}
}

func TestRefundJobOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	credit(t, b, "acme", 2*usd)
	// The fee was charged at acceptance: hold and settle, then record the job.
	hold(t, b, "acme", "vid_1", 1_500_000_000)
	if _, err := b.Settle(ctx, store.Settlement{RequestID: "vid_1", Charge: 1_500_000_000, Usage: pricing.Usage{Seconds: 15, Resolution: "720p"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutJob(ctx, store.Job{RequestID: "vid_1", Account: "acme", KeyID: "key_test", Model: "m", Route: "r", Amount: 1_500_000_000}); err != nil {
		t.Fatal(err)
	}

	const callers = 50
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		wins  atomic.Int64
	)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			refunded, err := b.RefundJob(ctx, "vid_1", "provider reported failure")
			if err != nil {
				t.Errorf("RefundJob: %v", err)
			}
			if refunded {
				wins.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d callers refunded, want exactly 1", wins.Load())
	}
	if again, err := b.RefundJob(ctx, "vid_1", "again"); err != nil || again {
		t.Errorf("a later RefundJob: %v, %v", again, err)
	}
	if j, err := b.Job(ctx, "vid_1"); err != nil || !j.Refunded {
		t.Errorf("job after refund: %+v, %v", j, err)
	}
	if a := balance(t, b, "acme"); a.Balance != 2*usd {
		t.Errorf("balance %d after the refund, want the 2 USD credited", a.Balance)
	}
	entries, err := b.Charges(ctx, "acme", 0)
	if err != nil {
		t.Fatal(err)
	}
	e := entries[0]
	if len(entries) != 3 || e.Kind != store.KindRefund || e.Amount != 1_500_000_000 || e.RequestID != "vid_1" ||
		e.BalanceAfter != 2*usd || e.Note != "provider reported failure" || e.Endpoint != pricing.EndpointVideo {
		t.Errorf("journal %+v", entries)
	}
	if r := audit(t, b, "acme"); r.Refunds != 1_500_000_000 || r.Charges != 1_500_000_000 {
		t.Errorf("audit %+v", r)
	}
}
