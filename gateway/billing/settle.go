package billing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/plugins"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/store"
)

// Finish ends t's hold on the handler's way out, whatever happened: a hold
// that neither settled nor went to the background is released (a failure
// before any response reached the client, or a settle that could not be
// written): the call is not charged. An answer's settle that ended here
// stops counting for the account's reads (Answering). A ticket that was
// never held (nil, or its hold refused) does nothing. ctx is the call's.
func (t *Ticket) Finish(ctx context.Context) {
	if t == nil || !t.held {
		return
	}
	t.releaseUnsettled(ctx)
	if t.answered != nil && !t.detached {
		t.l.settling.end(t.c.Key.Account, t.answered)
		t.l.shared.end(t.c.Key.Account, t.shared)
	}
}

// releaseUnsettled releases the hold of a call that ended without settling
// (a failure before any response reached the client, or a settle that could
// not be written): it is not charged.
func (t *Ticket) releaseUnsettled(ctx context.Context) {
	if t.settled || t.detached {
		return
	}
	l := t.l
	ctx = context.WithoutCancel(ctx)
	rid := t.c.RequestID
	var err error
	if t.carve.landedWithin(carveWaitMax) {
		err = l.holdWrite(func() error { return l.releaseOnce(ctx, rid) })
		if !errors.Is(err, store.ErrUnavailable) {
			l.released(rid, err)
			return
		}
	}
	// The carve is retrying, or the release met the store unavailable:
	// the failed call's answer does not wait; the release follows in the
	// background, tried again until the store answers.
	t.detached = true
	carve, account, answered, shared := t.carve, t.c.Key.Account, t.answered, t.shared
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		carve.wait()
		l.release(ctx, rid)
		if answered != nil { // the handler leaves these to whoever owns the hold
			l.settling.end(account, answered)
			l.shared.end(account, shared)
		}
	}()
}

// release releases the hold of request rid, uncharged, trying again while
// the store is unavailable until the gateway stops.
func (l *Ledger) release(ctx context.Context, rid string) {
	l.released(rid, l.storeWrite(l.life, "release", rid, func() error { return l.releaseOnce(ctx, rid) }))
}

// releaseOnce is one try at releasing the hold of request rid.
func (l *Ledger) releaseOnce(ctx context.Context, rid string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return l.store.Release(ctx, rid, "call failed")
}

// released records the outcome err of releasing request rid's hold.
func (l *Ledger) released(rid string, err error) {
	switch {
	case err == nil:
		l.met.openHolds.Add(-1)
	case errors.Is(err, store.ErrExists), errors.Is(err, store.ErrNoHold):
		// The request id already had an outcome (a settle whose write
		// reported an error yet landed), or never had a hold in the
		// store (a carve that failed for good, see carveHold): none is
		// open.
		l.met.openHolds.Add(-1)
		l.log.Error("release hold", "request_id", rid, "error", err.Error())
	case !errors.Is(err, store.ErrAlreadySettled):
		l.log.Error("release hold", "request_id", rid, "error", err.Error())
	}
}

// Settle prices the usage with the model's plugin and charges it, exactly
// once, and returns the charge. It returns once the charge is written,
// tried again while the store is unavailable for up to StoreRetryFor;
// should the write fail, the call stays unsettled and Finish releases its
// hold, uncharged. A video job is settled with it, before its answer,
// which carries the fee; a JSON answer and a stream after the client has
// them, with SettleAnswered.
func (t *Ticket) Settle(ctx context.Context, u pricing.Usage, note string) (pricing.Nano, error) {
	l := t.l
	st := t.Price(ctx, u, note)
	ctx = context.WithoutCancel(ctx)
	t.carve.wait()
	rctx, cancel := context.WithTimeout(l.life, StoreRetryFor)
	defer cancel()
	err := l.storeWrite(rctx, "settle", t.c.RequestID, func() error { return l.writeSettle(ctx, st) })
	if err != nil {
		l.log.Error("settle", "request_id", t.c.RequestID, "error", err.Error())
		return 0, err
	}
	t.recordSettled(st)
	return st.Charge, nil
}

// writeSettle is one try at writing st.
func (l *Ledger) writeSettle(ctx context.Context, st store.Settlement) error {
	if !l.local {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	t0 := time.Now()
	e, err := l.store.Settle(ctx, st)
	l.met.settleDur.Observe(time.Since(t0).Seconds())
	l.storeDown(err)
	if err == nil && l.overlap { // the balance only decides overlap (overlap.go)
		l.seen.saw(st.Account, e.BalanceAfter, time.Now())
	}
	return err
}

// recordSettled records that t is settled with st, written.
func (t *Ticket) recordSettled(st store.Settlement) {
	t.settled = true
	t.l.met.openHolds.Add(-1)
	t.l.met.observeSettle(t.c.Model.ID, t.c.Route, st.Usage, st.Charge)
}

// Price prices the usage with the model's plugin: t's settlement, which
// SettleAnswered writes. A JSON answer is priced before it goes out, so
// that its x-relay-cost-usd header says its charge.
//
// A plugin that cannot price the usage (its settle failed, and failed again
// on a fresh instance: see plugins.Host.Settle) does not decide the charge:
// fallbackCharge does, and the journal note, an error log line and
// relay_settle_fallback_total say so.
func (t *Ticket) Price(ctx context.Context, u pricing.Usage, note string) store.Settlement {
	l, c := t.l, &t.c
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	res, err := l.prices.Settle(ctx, abi.SettleRequest{
		Now:      l.now().UnixNano(),
		Endpoint: c.Endpoint,
		Model:    c.Model.ID,
		Route:    c.Route,
		Usage:    plugins.UsageToABI(u),
		Params:   c.Params,
	})
	l.observePlugin(c.Model.ID, "settle", t0)
	charge := pricing.Nano(res.Charge)
	if err != nil || res.Charge < 0 {
		reason := "plugin_error"
		if err == nil {
			reason, err = "negative_charge", fmt.Errorf("the plugin returned a negative charge %d", res.Charge)
		}
		var (
			priced bool
			how    string
		)
		charge, priced, how = fallbackCharge(c, u)
		plugin := l.prices.Catalog().PluginFor(c.Model.ID)
		if plugin == "" {
			plugin = "unknown"
		}
		kind := "published_price"
		if !priced {
			kind = "none"
		}
		l.met.settleFallback.WithLabelValues(plugin, reason, kind).Inc()
		l.log.Error("settle: the plugin could not price the usage; charged by the fallback",
			"request_id", c.RequestID, "plugin", plugin, "model", c.Model.ID, "route", c.Route,
			"fallback", how, "charge_usd", charge.Fixed(), "error", apierr.Bound(err.Error(), apierr.MaxMessage))
		note = strings.TrimSpace(note + " the plugin could not price the usage; " + how)
	}
	return store.Settlement{RequestID: c.RequestID, Account: c.Key.Account, Charge: charge, Usage: u, Note: note}
}

// fallbackCharge is the charge of a call whose plugin could not price its
// usage: the usage at the published price of the call's model and route —
// the price entry the plugin described at load, as the catalogue held it
// when the call was admitted — which is exactly what the usage costs at the
// published prices, never more. When that cannot be computed (no entry, a
// usage the entry cannot price such as an image without its size tier, an
// overflow) the call is charged nothing: the failure goes the customer's
// way. Like any charge it is taken in full even above the hold. priced is
// false when the call is charged nothing; how is the journal's wording of
// the rule applied.
func fallbackCharge(c *Call, u pricing.Usage) (charge pricing.Nano, priced bool, how string) {
	p, ok := c.Model.Routes[c.Route]
	if !ok {
		return 0, false, fmt.Sprintf("charged nothing: %q has no published price on route %q", c.Model.ID, c.Route)
	}
	charge, err := p.Charge(u)
	if err != nil {
		return 0, false, fmt.Sprintf("charged nothing: the published price cannot price it (%v)", err)
	}
	return charge, true, "charged the usage at the published price"
}
