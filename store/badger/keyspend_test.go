package badger

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

const cent = usd / 100

var march = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func mustCreateKey(t *testing.T, b *Store, k store.Key) store.Key {
	t.Helper()
	k.Hash = store.HashKey("sk-" + k.ID)
	if k.Route == "" {
		k.Route = store.AutoRoute
	}
	if err := b.CreateKey(context.Background(), k); err != nil {
		t.Fatalf("CreateKey %s: %v", k.ID, err)
	}
	return keyOfHash(t, b, k.Hash)
}

func keyOfHash(t *testing.T, b *Store, hash string) store.Key {
	t.Helper()
	k, err := b.KeyByHash(context.Background(), hash)
	if err != nil {
		t.Fatalf("KeyByHash: %v", err)
	}
	return k
}

func keyHold(t *testing.T, b *Store, account, keyID, reqID string, amount pricing.Nano, at time.Time) error {
	t.Helper()
	return b.Hold(context.Background(), store.Hold{RequestID: reqID, Account: account, KeyID: keyID,
		Model: "m", Route: "r", Endpoint: pricing.EndpointChat, Amount: amount, Created: at})
}

func settle(t *testing.T, b *Store, reqID string, charge pricing.Nano) {
	t.Helper()
	if _, err := b.Settle(context.Background(), store.Settlement{RequestID: reqID, Charge: charge}); err != nil {
		t.Fatalf("Settle(%q): %v", reqID, err)
	}
}

// A key's spend and period are in the ledger: a reopened store (a new
// process) has them, and holds on from there; the holds a crashed process
// left reserve nothing on the key after it, and their recovery charges it
// nothing.
func TestKeySpendAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	first, err := Open(dir, Options{Owner: "boot-A"})
	if err != nil {
		t.Fatal(err)
	}
	credit(t, first, "acme", 10*usd)
	key := mustCreateKey(t, first, store.Key{ID: "key_m", Account: "acme", Limit: usd, Reset: store.ResetMonthly})
	if err := keyHold(t, first, "acme", "key_m", "req_1", 50*cent, march); err != nil {
		t.Fatal(err)
	}
	settle(t, first, "req_1", 30*cent)
	if err := keyHold(t, first, "acme", "key_m", "req_lost", 40*cent, march); err != nil {
		t.Fatal(err)
	}
	if k := keyOfHash(t, first, key.Hash); k.Spent != 30*cent || k.Held != 40*cent {
		t.Errorf("before the crash: %+v", k)
	}
	if err := first.Close(); err != nil { // the crash: req_lost stays in the hold log
		t.Fatal(err)
	}

	second := openAt(t, dir, "boot-B", false)
	k := keyOfHash(t, second, key.Hash)
	if k.Spent != 30*cent || k.Held != 0 || !k.PeriodStart.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("after reopening: %+v", k)
	}
	if n, err := second.RecoverHolds(ctx); err != nil || n != 1 {
		t.Fatalf("RecoverHolds: %d, %v", n, err)
	}
	g, err := second.Generation(ctx, "acme", "req_lost")
	if err != nil || g.State != store.OutcomeRecovered || g.KeyID != "key_m" || g.Model != "m" || g.HoldAmount != 40*cent || g.Charge != 0 {
		t.Errorf("the recovered call: %+v, %v", g, err)
	}
	err = keyHold(t, second, "acme", "key_m", "req_2", 71*cent, march)
	var ie *store.InsufficientError
	if !errors.As(err, &ie) || ie.Limit != store.LimitKey || ie.Available != 70*cent {
		t.Errorf("a hold over what the period left: %v", err)
	}
	if err := keyHold(t, second, "acme", "key_m", "req_2", 70*cent, march); err != nil {
		t.Fatal(err)
	}
	settle(t, second, "req_2", 70*cent)
	if k := keyOfHash(t, second, key.Hash); k.Spent != usd || k.Held != 0 {
		t.Errorf("the period spent: %+v", k)
	}
	audit(t, second, "acme")
}

// Hold's copy of a key follows every write of it: a key created after a
// hold named its id limits the next hold; an update of its limit applies to
// the next hold; a key of another account limits nothing and counts nothing.
func TestKeyChangesReachHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	credit(t, b, "acme", 10*usd)
	credit(t, b, "beta", 10*usd)
	if err := keyHold(t, b, "acme", "key_late", "req_1", 2*usd, march); err != nil {
		t.Fatalf("a hold naming no key: %v", err)
	}
	key := mustCreateKey(t, b, store.Key{ID: "key_late", Account: "acme", Limit: usd})
	err := keyHold(t, b, "acme", "key_late", "req_2", usd+1, march)
	if !errors.Is(err, store.ErrInsufficient) {
		t.Errorf("a hold over a key created since: %v", err)
	}
	settle(t, b, "req_1", usd) // held before the key was: not its spend
	if k := keyOfHash(t, b, key.Hash); k.Spent != 0 || k.Held != 0 {
		t.Errorf("key after a call taken before it: %+v", k)
	}
	if err := keyHold(t, b, "acme", "key_late", "req_3", usd, march); err != nil {
		t.Fatal(err)
	}
	lower := pricing.Nano(90 * cent)
	k, err := b.UpdateKey(ctx, "key_late", store.KeyUpdate{Limit: &lower})
	if err != nil || k.Limit != lower || k.Held != usd {
		t.Fatalf("UpdateKey: %+v, %v", k, err)
	}
	err = keyHold(t, b, "acme", "key_late", "req_4", 0, march)
	var ie *store.InsufficientError
	if !errors.As(err, &ie) || ie.Limit != store.LimitKey || ie.Available != 0 || ie.Needed != 0 {
		// 90 cents − 1 USD held leaves nothing: reported as 0, not below.
		t.Errorf("a hold after the limit fell below the holds: %v", err)
	}
	// beta names acme's key: it is not beta's, so it limits nothing.
	if err := keyHold(t, b, "beta", "key_late", "req_5", 5*usd, march); err != nil {
		t.Errorf("a hold naming another account's key: %v", err)
	}
	settle(t, b, "req_5", 5*usd)
	settle(t, b, "req_3", 80*cent)
	if k := keyOfHash(t, b, key.Hash); k.Spent != 80*cent || k.Held != 0 {
		t.Errorf("key after its call and another account's: %+v", k)
	}
	audit(t, b, "acme")
	audit(t, b, "beta")
}

// A hold's period is its Created time's: the first in a later period starts
// it (persisted), and one dated before the key's period counts in it.
func TestKeyPeriods(t *testing.T) {
	t.Parallel()
	b := openTemp(t)
	credit(t, b, "acme", 100*usd)
	key := mustCreateKey(t, b, store.Key{ID: "key_d", Account: "acme", Limit: usd, Reset: store.ResetDaily})
	day := func(d int) time.Time { return time.Date(2026, 3, d, 9, 0, 0, 0, time.UTC) }
	for i, c := range []struct {
		day    int
		amount pricing.Nano
	}{{2, 60 * cent}, {3, 60 * cent}, {1, 40 * cent}} { // the 1st counts in the 3rd's period
		id := "req_" + string(rune('a'+i))
		if err := keyHold(t, b, "acme", "key_d", id, c.amount, day(c.day)); err != nil {
			t.Fatalf("%s on day %d: %v", id, c.day, err)
		}
		settle(t, b, id, c.amount)
	}
	err := keyHold(t, b, "acme", "key_d", "req_d", 1, day(3))
	var ie *store.InsufficientError
	if !errors.As(err, &ie) || ie.Limit != store.LimitKey || ie.Available != 0 {
		t.Errorf("a hold on the 3rd's spent limit: %v", err)
	}
	k := keyOfHash(t, b, key.Hash)
	if k.Spent != usd || !k.PeriodStart.Equal(time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("key: %+v, want 1 USD spent since the 3rd", k)
	}
	if k.SpentAt(day(4)) != 0 || k.RemainingAt(day(4)) != usd {
		t.Errorf("the 4th: spent %d, remaining %d", k.SpentAt(day(4)), k.RemainingAt(day(4)))
	}
	audit(t, b, "acme")
}

// UpdateKey and CreateKey refuse settings the ledger cannot keep, and write
// networks in the form Allows reads.
func TestKeySettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	credit(t, b, "acme", usd)
	k := mustCreateKey(t, b, store.Key{ID: "key_s", Account: "acme", Allow: []string{"192.168.1.7", "10.1.2.3/8"}})
	if !slices.Equal(k.Allow, []string{"192.168.1.7/32", "10.0.0.0/8"}) {
		t.Errorf("allow written as %q", k.Allow)
	}
	neg, weird, long := pricing.Nano(-1), "fortnightly", strings.Repeat("x", store.MaxNoteLen+1)
	bad := []string{"10.0.0.0/33"}
	for name, u := range map[string]store.KeyUpdate{
		"limit":  {Limit: &neg},
		"reset":  {Reset: &weird},
		"label":  {Label: &long},
		"allow":  {Allow: &bad},
		"expiry": {Expires: &time.Time{}},
	} {
		_, err := b.UpdateKey(ctx, "key_s", u)
		if name == "expiry" {
			if err != nil {
				t.Errorf("clearing the expiry: %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("UpdateKey with a bad %s: %v", name, err)
		}
	}
	if err := b.CreateKey(ctx, store.Key{ID: "key_t", Hash: store.HashKey("t"), Account: "acme", Route: "auto", Reset: "hourly"}); err == nil {
		t.Error("CreateKey with an unknown reset period succeeded")
	}
	if got := keyOfHash(t, b, k.Hash); !reflect.DeepEqual(got, k) {
		t.Errorf("refused updates changed the key:\n got %+v\nwant %+v", got, k)
	}
	if _, err := b.UpdateKey(ctx, "", store.KeyUpdate{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateKey of an empty id: %v", err)
	}
}

// Export gives a key's settings, its spend and its open holds as KeyByHash
// does, and an account's threshold.
func TestExportKeyLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	credit(t, b, "acme", 10*usd)
	if _, err := b.SetAlert(ctx, "acme", 2*usd); err != nil {
		t.Fatal(err)
	}
	mustCreateKey(t, b, store.Key{ID: "key_x", Account: "acme", Label: "agent", Limit: 5 * usd, Reset: store.ResetWeekly,
		Expires: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), Allow: []string{"10.0.0.0/8"}})
	if err := keyHold(t, b, "acme", "key_x", "req_1", usd, march); err != nil {
		t.Fatal(err)
	}
	settle(t, b, "req_1", 40*cent)
	if err := keyHold(t, b, "acme", "key_x", "req_2", usd, march); err != nil {
		t.Fatal(err)
	}
	want := keyOfHash(t, b, store.HashKey("sk-key_x"))
	if want.Spent != 40*cent || want.Held != usd || want.PeriodStart.IsZero() || want.Label != "agent" {
		t.Fatalf("key: %+v", want)
	}
	var c collect
	if err := b.Export(ctx, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.keys) != 1 || !reflect.DeepEqual(c.keys[0], want) {
		t.Errorf("exported key:\n got %+v\nwant %+v", c.keys, want)
	}
	if len(c.accounts) != 1 || c.accounts[0].AlertBelow != 2*usd {
		t.Errorf("exported account: %+v", c.accounts)
	}
}

// A ledger written before key limits (account, key and a released call's
// outcome in their v1 layouts, as that build wrote them) works on: its key
// starts spending (a spend record of its own) and takes settings, its
// account takes a threshold, and its released call reads back without the
// model the outcome did not keep.
func TestLedgerBeforeKeyLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	writeBeforeKeyLimits(t, b)
	oldKey := func() store.Key {
		t.Helper()
		keys, err := b.ListKeys(ctx, "acme")
		if err != nil || len(keys) != 1 {
			t.Fatalf("ListKeys: %+v, %v", keys, err)
		}
		return keys[0]
	}
	if a := balance(t, b, "acme"); a.Balance != 9_350_000_000 || a.AlertBelow != 0 {
		t.Errorf("account v1: %+v", a)
	}
	if k := oldKey(); k.ID != "key_1" || k.Limit != 0 || k.Spent != 0 || k.Label != "" || !k.PeriodStart.IsZero() {
		t.Errorf("key v1: %+v", k)
	}
	g, err := b.Generation(ctx, "acme", "req_1")
	if err != nil || g.State != store.OutcomeReleased || g.HoldAmount != 2_000_000 || g.Note != "upstream 500" || g.Model != "" {
		t.Errorf("a release of the build before: %+v, %v", g, err)
	}
	if err := keyHold(t, b, "acme", "key_1", "req_2", usd, march); err != nil {
		t.Fatal(err)
	}
	settle(t, b, "req_2", 25*cent)
	if _, err := b.SetAlert(ctx, "acme", usd); err != nil {
		t.Fatal(err)
	}
	if k := oldKey(); k.Spent != 25*cent || k.Exclude[0] != "gpt-x" {
		t.Errorf("the old key after a call: %+v", k)
	}
	label := "old"
	if k, err := b.UpdateKey(ctx, "key_1", store.KeyUpdate{Label: &label}); err != nil || k.Label != "old" || k.Spent != 25*cent || !k.Revoked {
		t.Errorf("the old key, labelled: %+v, %v", k, err)
	}
	for key, tag := range map[string]byte{"acct/acme": tagAccountV2, "key/ab": tagKeyV2, "spend/key_1": tagSpendV1} {
		if got := tagOf(t, b, key); got != tag {
			t.Errorf("%s is %s after it changed, want %s", key, tagName(got), tagName(tag))
		}
	}
	audit(t, b, "acme")
}

// writeBeforeKeyLimits writes the records of beforeKeyLimits (acct/acme,
// key/ab for key_1, revoked, and done/req_1), key_1's id index and the v1
// account's journal (seq 3, 9.35 USD).
func writeBeforeKeyLimits(t *testing.T, b *Store) {
	t.Helper()
	old := make(map[string][]byte)
	for _, r := range beforeKeyLimits {
		val, err := hex.DecodeString(r.hex)
		if err != nil {
			t.Fatal(err)
		}
		old[r.key] = val
	}
	old["keyid/key_1"] = []byte("ab")
	if err := b.db.Update(func(txn *badger.Txn) error {
		for k, v := range old {
			if err := txn.Set([]byte(k), v); err != nil {
				return err
			}
		}
		for seq := uint64(1); seq <= 3; seq++ {
			e := entryRec{Seq: seq, Kind: store.KindRecovery, Account: "acme", BalanceAfter: 9_350_000_000, Time: t0}
			if seq == 1 {
				e.Kind, e.Amount = store.KindCredit, 9_350_000_000
			}
			if err := putEntry(txn, &e); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Callers race on one key across a period boundary, holding, settling and
// releasing, while its settings change: the period's spend never passes
// its limit (every charge is its hold), and memory and the ledger agree at
// the end.
func TestKeyConcurrentPeriods(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	credit(t, b, "acme", 1000*usd)
	key := mustCreateKey(t, b, store.Key{ID: "key_r", Account: "acme", Limit: 10 * cent, Reset: store.ResetMonthly})
	april := march.AddDate(0, 1, 0)
	var (
		wg       sync.WaitGroup
		admitted atomic.Int64
	)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := march
			if i%2 == 1 {
				at = april
			}
			id := fmt.Sprintf("req_%03d", i)
			err := keyHold(t, b, "acme", "key_r", id, cent, at)
			if errors.Is(err, store.ErrInsufficient) {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			admitted.Add(1)
			if i%3 == 0 {
				if err := b.Release(ctx, id, "failed"); err != nil {
					t.Error(err)
				}
				return
			}
			if _, err := b.Settle(ctx, store.Settlement{RequestID: id, Charge: cent}); err != nil {
				t.Error(err)
			}
		}()
		if i == 100 {
			label := "renamed mid-race"
			if _, err := b.UpdateKey(ctx, "key_r", store.KeyUpdate{Label: &label}); err != nil {
				t.Error(err)
			}
		}
	}
	wg.Wait()
	k := keyOfHash(t, b, key.Hash)
	if k.Held != 0 || k.Spent > 10*cent || k.Label != "renamed mid-race" || admitted.Load() < 10 {
		t.Errorf("key %+v after admitting %d", k, admitted.Load())
	}
	if !k.PeriodStart.Equal(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("period start %v, want April", k.PeriodStart)
	}
	audit(t, b, "acme")
}

// Audit compares the keys Hold has in memory with their open holds and the
// ledger.
func TestAuditKeys(t *testing.T) {
	t.Parallel()
	b := openTemp(t)
	credit(t, b, "acme", usd)
	mustCreateKey(t, b, store.Key{ID: "key_a", Account: "acme", Limit: usd, Reset: store.ResetDaily})
	if err := keyHold(t, b, "acme", "key_a", "req_1", 10*cent, march); err != nil {
		t.Fatal(err)
	}
	audit(t, b, "acme")
	a := b.mem.account("acme")
	a.mu.Lock()
	a.keys["key_a"].held++
	a.keys["key_a"].rec.spend.Spent = 5
	a.mu.Unlock()
	r, err := b.Audit(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != 2 || !strings.Contains(r.Problems[0], `key "key_a": held in memory`) ||
		!strings.Contains(r.Problems[1], `key "key_a": Hold sees spent 5`) {
		t.Errorf("audit of a key out of step: %q", r.Problems)
	}
}
