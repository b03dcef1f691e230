package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

const cent = usd / 100

// march is a moment in a month, for periods.
var march = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func mustKey(t *testing.T, s Store, k store.Key) store.Key {
	t.Helper()
	if k.Hash == "" {
		k.Hash = store.HashKey("secret-" + k.ID)
	}
	if k.Route == "" {
		k.Route = store.AutoRoute
	}
	if err := s.CreateKey(ctx, k); err != nil {
		t.Fatalf("CreateKey %s: %v", k.ID, err)
	}
	return mustKeyByHash(t, s, k.Hash)
}

func mustKeyByHash(t *testing.T, s Store, hash string) store.Key {
	t.Helper()
	got, err := s.KeyByHash(ctx, hash)
	if err != nil {
		t.Fatalf("KeyByHash: %v", err)
	}
	return got
}

func keyHold(account, keyID, reqID string, amount pricing.Nano, at time.Time) store.Hold {
	h := holdOf(account, reqID, amount)
	h.KeyID, h.Created = keyID, at
	return h
}

// wantKeySpend fails t unless the key's spend and holds are as given.
func wantKeySpend(t *testing.T, s Store, hash string, spent, held pricing.Nano) store.Key {
	t.Helper()
	k := mustKeyByHash(t, s, hash)
	if k.Spent != spent || k.Held != held {
		t.Errorf("key %s: spent %d, held %d; want %d and %d", k.ID, k.Spent, k.Held, spent, held)
	}
	return k
}

// wantRefused fails t unless err is a refusal by limit with needed and
// available as given.
func wantRefused(t *testing.T, what string, err error, limit string, needed, available pricing.Nano) {
	t.Helper()
	var ie *store.InsufficientError
	if !errors.As(err, &ie) || ie.Limit != limit || ie.Needed != needed || ie.Available != available {
		t.Errorf("%s: %v (%+v), want refused by the %s limit, needed %d, available %d", what, err, ie, limit, needed, available)
	}
}

// KeyLimit: a key's holds and charges count against its spend limit in its
// period; a hold that does not fit is refused naming the key, with what
// remains; a new period starts from nothing; the account's own credit
// still refuses as before.
func (k *kit) keyLimit(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 10*usd)
	key := mustKey(t, s, store.Key{ID: "key_lim", Account: "acme", Limit: usd, Reset: store.ResetMonthly, Label: "agent"})
	if key.Limit != usd || key.Reset != store.ResetMonthly || key.Label != "agent" || key.Spent != 0 || key.Held != 0 {
		t.Fatalf("created key: %+v", key)
	}
	hold := func(id string, amount pricing.Nano, at time.Time) error {
		return s.Hold(ctx, keyHold("acme", "key_lim", id, amount, at))
	}
	if err := hold("req_1", 60*cent, march); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "a hold over the key's limit", hold("req_2", 60*cent, march), store.LimitKey, 60*cent, 40*cent)
	if err := hold("req_3", 40*cent, march); err != nil {
		t.Fatalf("a hold that fits the key exactly: %v", err)
	}
	wantKeySpend(t, s, key.Hash, 0, usd)
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "req_1", Account: "acme", Charge: 50 * cent}); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "req_3", "failed"); err != nil {
		t.Fatal(err)
	}
	wantKeySpend(t, s, key.Hash, 50*cent, 0)
	wantRefused(t, "a hold over what the period's spend left", hold("req_4", 60*cent, march.Add(time.Hour)), store.LimitKey, 60*cent, 50*cent)
	if err := hold("req_5", 50*cent, march.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// An overrun is taken in full, and counts.
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "req_5", Account: "acme", Charge: 70 * cent}); err != nil {
		t.Fatal(err)
	}
	got := wantKeySpend(t, s, key.Hash, 120*cent, 0)
	if r := got.RemainingAt(march); r != 0 {
		t.Errorf("RemainingAt after an overrun: %d, want 0", r)
	}
	wantRefused(t, "a hold on a spent key", hold("req_6", 1, march.Add(2*time.Hour)), store.LimitKey, 1, 0)

	// April: a new period.
	april := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	if got.SpentAt(april) != 0 || got.SpentAt(march) != 120*cent {
		t.Errorf("SpentAt: march %d, april %d", got.SpentAt(march), got.SpentAt(april))
	}
	if err := hold("req_7", 90*cent, april); err != nil {
		t.Fatalf("a hold in the next period: %v", err)
	}
	got = wantKeySpend(t, s, key.Hash, 0, 90*cent)
	if !got.PeriodStart.Equal(april) {
		t.Errorf("period start %v, want %v", got.PeriodStart, april)
	}
	wantAccount(t, s, "acme", 10*usd-120*cent, 90*cent)

	// The account refuses first when it is the smaller.
	mustCredit(t, s, "poor", 30*cent)
	mustKey(t, s, store.Key{ID: "key_poor", Account: "poor", Limit: 5 * usd, Reset: store.ResetDaily})
	err := s.Hold(ctx, keyHold("poor", "key_poor", "req_8", 50*cent, march))
	wantRefused(t, "a hold over the account's credit", err, store.LimitAccount, 50*cent, 30*cent)
	if !errors.Is(err, store.ErrInsufficient) {
		t.Errorf("a refusal does not wrap ErrInsufficient: %v", err)
	}
	books(t, s, "acme")
}

// KeySpend: a key without a limit still counts its spend (for ever, with no
// reset), and a hold with a key id that names no key limits nothing.
func (k *kit) keySpend(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 10*usd)
	key := mustKey(t, s, store.Key{ID: "key_free", Account: "acme"})
	for i, at := range []time.Time{march, march.AddDate(0, 1, 0), march.AddDate(1, 0, 0)} {
		id := fmt.Sprint("req_", i)
		if err := s.Hold(ctx, keyHold("acme", "key_free", id, usd, at)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Settle(ctx, store.Settlement{RequestID: id, Account: "acme", Charge: 30 * cent}); err != nil {
			t.Fatal(err)
		}
	}
	got := wantKeySpend(t, s, key.Hash, 90*cent, 0)
	if got.RemainingAt(march) != -1 {
		t.Errorf("RemainingAt of a key without a limit: %d, want -1", got.RemainingAt(march))
	}
	if err := s.Hold(ctx, keyHold("acme", "key_nobody", "req_x", usd, march)); err != nil {
		t.Errorf("a hold naming no key: %v", err)
	}
}

// UpdateKey changes a key's settings and keeps its spend; CreateKey keeps
// them as given.
func (k *kit) updateKey(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 10*usd)
	expires := time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC)
	key := mustKey(t, s, store.Key{ID: "key_u", Account: "acme", Label: "ci", Limit: 5 * usd, Reset: store.ResetWeekly,
		Expires: expires, Allow: []string{"10.0.0.0/8", "192.168.1.7/32"}})
	if key.Label != "ci" || key.Limit != 5*usd || key.Reset != store.ResetWeekly || !key.Expires.Equal(expires) ||
		!slices.Equal(key.Allow, []string{"10.0.0.0/8", "192.168.1.7/32"}) {
		t.Fatalf("created key: %+v", key)
	}
	if err := s.Hold(ctx, keyHold("acme", "key_u", "req_1", usd, march)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "req_1", Account: "acme", Charge: 40 * cent}); err != nil {
		t.Fatal(err)
	}
	label, limit, reset, never, anywhere := "batch", pricing.Nano(2*usd), store.ResetDaily, time.Time{}, []string{}
	got, err := s.UpdateKey(ctx, "key_u", store.KeyUpdate{Label: &label, Limit: &limit, Reset: &reset})
	if err != nil {
		t.Fatal(err)
	}
	if got.Label != "batch" || got.Limit != 2*usd || got.Reset != store.ResetDaily || !got.Expires.Equal(expires) ||
		len(got.Allow) != 2 || got.Spent != 40*cent || got.Hash != key.Hash || got.Account != "acme" {
		t.Errorf("after UpdateKey: %+v", got)
	}
	if _, err := s.UpdateKey(ctx, "key_u", store.KeyUpdate{Expires: &never, Allow: &anywhere}); err != nil {
		t.Fatal(err)
	}
	got = mustKeyByHash(t, s, key.Hash)
	if !got.Expires.IsZero() || len(got.Allow) != 0 || got.Label != "batch" {
		t.Errorf("after clearing expiry and allow-list: %+v", got)
	}
	keys, err := s.ListKeys(ctx, "acme")
	if err != nil || len(keys) != 1 || keys[0].Limit != 2*usd || keys[0].Spent != 40*cent {
		t.Errorf("ListKeys: %+v, %v", keys, err)
	}
	_, err = s.UpdateKey(ctx, "key_none", store.KeyUpdate{Label: &label})
	wantErr(t, "UpdateKey of an unknown id", err, store.ErrNotFound)
}

// ConcurrentKeyLimit: callers race to hold 3 cents each on a key limited to
// 10 cents, on an account with plenty: exactly three are admitted; each
// then overruns by a cent, and the key's spend is 12 cents — the limit
// plus the overruns, never another hold.
func (k *kit) concurrentKeyLimit(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 100*usd)
	key := mustKey(t, s, store.Key{ID: "key_c", Account: "acme", Limit: 10 * cent, Reset: store.ResetMonthly})
	at := k.spread(t, s)
	var (
		mu       sync.Mutex
		admitted []string
		refused  atomic.Int64
	)
	race(max(k.opts.Callers, 12), func(i int) {
		id := fmt.Sprintf("req_%04d", i)
		err := at(i).Hold(ctx, keyHold("acme", "key_c", id, 3*cent, march))
		var ie *store.InsufficientError
		switch {
		case err == nil:
			mu.Lock()
			admitted = append(admitted, id)
			mu.Unlock()
		case errors.As(err, &ie) && ie.Limit == store.LimitKey:
			refused.Add(1)
		default:
			t.Errorf("Hold %s: %v", id, err)
		}
	})
	if len(admitted) != 3 {
		t.Fatalf("%d admitted, want 3", len(admitted))
	}
	race(len(admitted), func(i int) {
		if _, err := at(i+1).Settle(ctx, store.Settlement{RequestID: admitted[i], Account: "acme", Charge: 4 * cent}); err != nil {
			t.Errorf("Settle: %v", err)
		}
	})
	wantKeySpend(t, s, key.Hash, 12*cent, 0)
	wantAccount(t, s, "acme", 100*usd-12*cent, 0)
}

// Generation: an ended call reads back with its usage, charge and note, to
// its own account only; an open hold or an unknown id is ErrNotFound.
func (k *kit) generation(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 10*usd)
	mustCredit(t, s, "beta", 10*usd)
	mustHold(t, s, "acme", "req_est", usd)
	u := pricing.Usage{InputTokens: 1200, OutputTokens: 34, CacheReadTokens: 100}
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "req_est", Account: "acme", Charge: 1234, Usage: u,
		Note: "estimated: the client went away after 5 events"}); err != nil {
		t.Fatal(err)
	}
	g, err := s.Generation(ctx, "acme", "req_est")
	if err != nil {
		t.Fatal(err)
	}
	if g.RequestID != "req_est" || g.Account != "acme" || g.KeyID != "key_kit" || g.Model != "kit-model" ||
		g.Route != "kit-route" || g.Endpoint != pricing.EndpointChat || g.State != store.OutcomeSettled ||
		g.Usage != u || g.Charge != 1234 || g.HoldAmount != usd || !g.Estimated || g.Time.IsZero() {
		t.Errorf("Generation: %+v", g)
	}
	mustHold(t, s, "acme", "req_exact", usd)
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "req_exact", Account: "acme", Charge: 99}); err != nil {
		t.Fatal(err)
	}
	if g, err := s.Generation(ctx, "acme", "req_exact"); err != nil || g.Estimated || g.Charge != 99 {
		t.Errorf("an exact charge: %+v, %v", g, err)
	}
	mustHold(t, s, "acme", "req_failed", usd)
	if err := s.Release(ctx, "req_failed", "upstream 500"); err != nil {
		t.Fatal(err)
	}
	if g, err := s.Generation(ctx, "acme", "req_failed"); err != nil || g.State != store.OutcomeReleased || g.Charge != 0 ||
		g.Model != "kit-model" || g.HoldAmount != usd {
		t.Errorf("a released call: %+v, %v", g, err)
	}
	mustHold(t, s, "acme", "req_open", usd)
	_, err = s.Generation(ctx, "acme", "req_open")
	wantErr(t, "Generation of an open hold", err, store.ErrNotFound)
	_, err = s.Generation(ctx, "beta", "req_est")
	wantErr(t, "Generation of another account's call", err, store.ErrNotFound)
	_, err = s.Generation(ctx, "acme", "req_never")
	wantErr(t, "Generation of an unknown id", err, store.ErrNotFound)
}

// Journal lists the entries whose time is in [from, to), oldest first.
func (k *kit) journalRange(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 10*usd)
	mustHold(t, s, "acme", "req_1", usd)
	mustSettle(t, s, "req_1", 10*cent)
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	mustCredit(t, s, "acme", usd)
	read := func(from, to time.Time) []store.Entry {
		t.Helper()
		var out []store.Entry
		if err := s.Journal(ctx, "acme", from, to, func(e store.Entry) error { out = append(out, e); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	all := read(time.Time{}, mid.Add(time.Hour))
	if len(all) != 3 || all[0].Seq != 1 || all[1].Kind != store.KindCharge || all[2].Kind != store.KindCredit {
		t.Errorf("the whole journal: %+v", all)
	}
	if first := read(time.Time{}, mid); len(first) != 2 || first[1].Amount != -10*cent {
		t.Errorf("before mid: %+v", first)
	}
	if last := read(mid, mid.Add(time.Hour)); len(last) != 1 || last[0].Amount != usd {
		t.Errorf("after mid: %+v", last)
	}
	stop := errors.New("stop")
	n := 0
	err := s.Journal(ctx, "acme", time.Time{}, mid.Add(time.Hour), func(store.Entry) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("fn's error: %v after %d entries, want it after 1", err, n)
	}
	err = s.Journal(ctx, "nobody", time.Time{}, mid, func(store.Entry) error { return nil })
	wantErr(t, "Journal of an unknown account", err, store.ErrNotFound)
}

// Alert: accounts under their low-balance threshold are counted, by
// available credit (balance − holds).
func (k *kit) alert(t *testing.T, s Store) {
	mustCredit(t, s, "acme", 3*usd)
	mustCredit(t, s, "beta", 30*usd)
	count := func() int {
		t.Helper()
		n, err := s.AccountsBelowAlert(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Errorf("no thresholds: %d under, want 0", n)
	}
	a, err := s.SetAlert(ctx, "acme", 5*usd)
	if err != nil || a.AlertBelow != 5*usd || a.Balance != 3*usd {
		t.Fatalf("SetAlert: %+v, %v", a, err)
	}
	if _, err := s.SetAlert(ctx, "beta", 5*usd); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Errorf("acme under: %d, want 1", n)
	}
	mustHold(t, s, "beta", "req_big", 26*usd) // 4 USD left available
	if n := count(); n != 2 {
		t.Errorf("beta's hold takes it under: %d, want 2", n)
	}
	mustCredit(t, s, "acme", 10*usd)
	if got := mustBalance(t, s, "acme"); got.AlertBelow != 5*usd {
		t.Errorf("Balance lost the threshold: %+v", got)
	}
	if n := count(); n != 1 {
		t.Errorf("after a credit: %d, want 1", n)
	}
	if _, err := s.SetAlert(ctx, "beta", 0); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Errorf("threshold removed: %d, want 0", n)
	}
	_, err = s.SetAlert(ctx, "nobody", usd)
	wantErr(t, "SetAlert of an unknown account", err, store.ErrNotFound)
}
