package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// Keys are found by hash, unique by hash and id, listed per account and
// all, and revoked.
func (k *kit) keys(t *testing.T, s Store) {
	for _, a := range []string{"acme", "beta"} {
		if _, err := s.CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	created := []store.Key{
		testKey("key_a1", "acme", store.AutoRoute, "openai", "anthropic"),
		testKey("key_a2", "acme", "fast"),
		testKey("key_b1", "beta", "cheap"),
	}
	for _, key := range created {
		if err := s.CreateKey(ctx, key); err != nil {
			t.Fatalf("CreateKey %s: %v", key.ID, err)
		}
	}
	for _, key := range created {
		got, err := s.KeyByHash(ctx, key.Hash)
		if err != nil {
			t.Fatalf("KeyByHash %s: %v", key.ID, err)
		}
		if got.ID != key.ID || got.Hash != key.Hash || got.Account != key.Account || got.Route != key.Route ||
			fmt.Sprint(got.Exclude) != fmt.Sprint(key.Exclude) || got.Revoked || got.Created.IsZero() {
			t.Errorf("KeyByHash %s:\n got %+v\nwant %+v", key.ID, got, key)
		}
	}
	_, err := s.KeyByHash(ctx, store.HashKey("unknown"))
	wantErr(t, "KeyByHash of an unknown hash", err, store.ErrNotFound)

	dupHash := created[0]
	dupHash.ID = "key_other"
	wantErr(t, "CreateKey with a duplicate hash", s.CreateKey(ctx, dupHash), store.ErrExists)
	dupID := testKey("key_a1", "acme", "fast")
	dupID.Hash = store.HashKey("another secret")
	wantErr(t, "CreateKey with a duplicate id", s.CreateKey(ctx, dupID), store.ErrExists)
	wantErr(t, "CreateKey on an unknown account", s.CreateKey(ctx, testKey("key_x", "nobody", "fast")), store.ErrNotFound)

	listKeys(t, s)
	revokeKeys(t, s, created)
}

// testKey is a key of the keys test, its secret made from its id.
func testKey(id, account, route string, exclude ...string) store.Key {
	return store.Key{ID: id, Hash: store.HashKey("secret-" + id), Account: account, Route: route, Exclude: exclude}
}

// listKeys lists the keys test's keys per account and all, in id order.
func listKeys(t *testing.T, s Store) {
	ids := func(keys []store.Key, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, 0, len(keys))
		for _, k := range keys {
			out = append(out, k.ID)
		}
		return fmt.Sprint(out)
	}
	if got := ids(s.ListKeys(ctx, "acme")); got != "[key_a1 key_a2]" {
		t.Errorf("ListKeys(acme) = %s", got)
	}
	if got := ids(s.ListKeys(ctx, "beta")); got != "[key_b1]" {
		t.Errorf("ListKeys(beta) = %s", got)
	}
	if got := ids(s.ListKeys(ctx, "")); got != "[key_a1 key_a2 key_b1]" {
		t.Errorf("ListKeys(all) = %s", got)
	}
	_, err := s.ListKeys(ctx, "nobody")
	wantErr(t, "ListKeys of an unknown account", err, store.ErrNotFound)
}

// revokeKeys revokes the keys test's key_a2: found revoked by hash and in
// the list, the others not; revoking again is no error.
func revokeKeys(t *testing.T, s Store, created []store.Key) {
	r, err := s.RevokeKey(ctx, "key_a2")
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "key_a2" || !r.Revoked || r.Hash != created[1].Hash || r.Account != "acme" {
		t.Errorf("RevokeKey returned %+v", r)
	}
	if got, err := s.KeyByHash(ctx, created[1].Hash); err != nil || !got.Revoked {
		t.Errorf("a revoked key by hash: %+v, %v; want it, revoked", got, err)
	}
	if got, err := s.KeyByHash(ctx, created[0].Hash); err != nil || got.Revoked {
		t.Errorf("another key after a revoke: %+v, %v", got, err)
	}
	if again, err := s.RevokeKey(ctx, "key_a2"); err != nil || !again.Revoked {
		t.Errorf("revoking twice: %+v, %v", again, err)
	}
	_, err = s.RevokeKey(ctx, "key_unknown")
	wantErr(t, "RevokeKey of an unknown id", err, store.ErrNotFound)
	keys, err := s.ListKeys(ctx, "acme")
	if err != nil || len(keys) != 2 || keys[0].Revoked || !keys[1].Revoked {
		t.Errorf("ListKeys after a revoke: %+v, %v", keys, err)
	}
}

// ListAccounts pages through the accounts in id order.
func (k *kit) listAccounts(t *testing.T, s Store) {
	if got, err := s.ListAccounts(ctx, "", 10); err != nil || len(got) != 0 {
		t.Errorf("ListAccounts of an empty store: %+v, %v", got, err)
	}
	names := []string{"delta", "alpha", "echo", "charlie", "bravo", "golf", "foxtrot"}
	for i, n := range names {
		mustCredit(t, s, n, pricing.Nano(i+1)*usd)
	}
	mustHold(t, s, "charlie", "req_c", usd)
	var pages [][]string
	var all []store.Account
	after := ""
	for range len(names) + 1 {
		page, err := s.ListAccounts(ctx, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 3 {
			t.Fatalf("page of %d accounts, limit 3", len(page))
		}
		var ids []string
		for _, a := range page {
			ids = append(ids, a.ID)
		}
		pages = append(pages, ids)
		all = append(all, page...)
		after = page[len(page)-1].ID
	}
	if got := fmt.Sprint(pages); got != "[[alpha bravo charlie] [delta echo foxtrot] [golf]]" {
		t.Errorf("pages %s", got)
	}
	for _, a := range all {
		want := mustBalance(t, s, a.ID)
		if a.Balance != want.Balance || a.Held != want.Held {
			t.Errorf("listed %+v, Balance says %+v", a, want)
		}
	}
	if len(all) == 7 && (all[1].Balance != 5*usd || all[2].Held != usd) {
		t.Errorf("listed bravo %+v, charlie %+v", all[1], all[2])
	}
	for _, limit := range []int{0, -1, store.MaxAccountPage + 1} {
		if got, err := s.ListAccounts(ctx, "", limit); err != nil || len(got) != len(names) {
			t.Errorf("ListAccounts(limit %d): %d accounts, %v; want all %d", limit, len(got), err, len(names))
		}
	}
	if got, err := s.ListAccounts(ctx, "c", 2); err != nil || len(got) != 2 || got[0].ID != "charlie" || got[1].ID != "delta" {
		t.Errorf(`ListAccounts(after "c", 2): %+v, %v`, got, err)
	}
}

// A job is stored once and read back; its refund credits its amount once.
func (k *kit) jobs(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 2*usd)
	mustHold(t, s, "acme", "vid_1", 1_500_000_000)
	mustSettle(t, s, "vid_1", 1_500_000_000) // the fee, at acceptance
	job := store.Job{RequestID: "vid_1", Account: "acme", KeyID: "key_kit", Model: "video-1", Route: "r",
		Line: "line-1", Amount: 1_500_000_000}
	if err := s.PutJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	got, err := s.Job(ctx, "vid_1")
	if err != nil {
		t.Fatal(err)
	}
	job.Created = got.Created
	if !got.Created.Equal(job.Created) || got.Created.IsZero() || fmt.Sprint(got) != fmt.Sprint(job) {
		t.Errorf("Job:\n got %+v\nwant %+v", got, job)
	}
	wantErr(t, "PutJob of a duplicate", s.PutJob(ctx, store.Job{RequestID: "vid_1", Account: "acme", Amount: 1}), store.ErrExists)
	wantErr(t, "PutJob on an unknown account", s.PutJob(ctx, store.Job{RequestID: "vid_2", Account: "nobody", Amount: 1}), store.ErrNotFound)
	if err := s.PutJob(ctx, store.Job{RequestID: "vid_3", Account: "acme", Amount: -1}); err == nil {
		t.Error("PutJob of a negative amount succeeded")
	}
	_, err = s.Job(ctx, "vid_unknown")
	wantErr(t, "Job of an unknown id", err, store.ErrNotFound)
	_, err = s.RefundJob(ctx, "vid_unknown", "x")
	wantErr(t, "RefundJob of an unknown id", err, store.ErrNotFound)

	wantAccount(t, s, "acme", 500_000_000, 0)
	if ok, err := s.RefundJob(ctx, "vid_1", "provider reported failure"); err != nil || !ok {
		t.Fatalf("RefundJob: %v, %v", ok, err)
	}
	if ok, err := s.RefundJob(ctx, "vid_1", "again"); err != nil || ok {
		t.Errorf("second RefundJob: %v, %v; want false, nil", ok, err)
	}
	if j, err := s.Job(ctx, "vid_1"); err != nil || !j.Refunded {
		t.Errorf("job after its refund: %+v, %v", j, err)
	}
	wantAccount(t, s, "acme", 2*usd, 0)
	entries := books(t, s, "acme")
	e := entries[0]
	if len(entries) != 3 || e.Kind != store.KindRefund || e.RequestID != "vid_1" || e.Amount != 1_500_000_000 ||
		e.BalanceAfter != 2*usd || e.Note != "provider reported failure" || e.Model != "video-1" {
		t.Errorf("journal after the refund: %+v", entries)
	}
}

// Many concurrent refunds of one job credit it once.
func (k *kit) refundJobOnce(t *testing.T, s Store) {
	mustCredit(t, s, "acme", usd)
	if err := s.PutJob(ctx, store.Job{RequestID: "vid_1", Account: "acme", Amount: 700_000_000}); err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		wins  atomic.Int64
	)
	for range k.opts.Callers {
		wg.Go(func() {
			<-start
			ok, err := s.RefundJob(ctx, "vid_1", "failed")
			if err != nil {
				t.Errorf("RefundJob: %v", err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d concurrent RefundJob calls refunded, want exactly 1", wins.Load())
	}
	wantAccount(t, s, "acme", 1_700_000_000, 0)
	if entries := books(t, s, "acme"); len(entries) != 2 {
		t.Errorf("journal after concurrent refunds: %+v", entries)
	}
}
