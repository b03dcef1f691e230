package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// What a key holder can read of its key and account: authenticated by the
// sk- key as a Bearer token, like a relayed call, and rate-limited by the
// key's bucket. Every read first waits for the account's answered calls to
// settle (read-after-answer, as the admin reads do), so that it shows the
// charge of every call whose answer came before it. Amounts are exact:
// decimal USD text with nine decimals formatted from nano-USD, or — in the
// OpenAI billing shapes that chat front-ends poll — JSON numbers written
// from the same exact decimal text, never through a float.
func (g *Gateway) holderRoutes(r *httprouter.Router) {
	r.GET("/v1/key", g.handle("key", g.handleKey))
	r.GET("/v1/generations/:id", g.handle("generation", g.handleGeneration))
	r.GET("/v1/dashboard/billing/subscription", g.handle("billing_subscription", g.handleSubscription))
	r.GET("/v1/dashboard/billing/usage", g.handle("billing_usage", g.handleUsage))
}

// holder authenticates a key holder's read and returns the key as the store
// has it now, after the account's answered calls have settled: not the key
// cache's copy, whose spend may be 10 s old.
func (g *Gateway) holder(r *http.Request, info *reqInfo) (store.Key, error) {
	ctx := r.Context()
	k, err := g.authenticate(ctx, r, false, info)
	if err != nil {
		return store.Key{}, err
	}
	if err := g.limits.allowKey(ctx, k, g.now()); err != nil {
		return store.Key{}, err
	}
	g.bill.WaitSettled(ctx, k.Account)
	fresh, err := g.store.KeyByHash(ctx, k.Hash)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Key{}, apierr.Unauthorized("invalid API key")
	case err != nil:
		return store.Key{}, err
	case fresh.Revoked:
		g.keys.evictID(fresh.ID)
		return store.Key{}, apierr.Unauthorized("this API key has been revoked")
	}
	g.keys.put(fresh, g.now())
	return fresh, nil
}

// writePrivate writes v as JSON that no cache may keep: it is one key's.
func writePrivate(w http.ResponseWriter, v any) error {
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, v)
}

// KeyInfo is GET /v1/key: the caller's key and its account.
type KeyInfo struct {
	Object  string  `json:"object"` // "key"
	ID      string  `json:"id"`
	Label   string  `json:"label"`
	Route   string  `json:"route"`
	Created string  `json:"created"`
	Expires *string `json:"expires"` // null: never
	// LimitUSD is the spend limit per period; null: none.
	LimitUSD *string `json:"limit_usd"`
	// LimitReset is the period: daily, weekly, monthly (UTC), or none (the
	// limit counts from the key's creation).
	LimitReset  string  `json:"limit_reset"`
	PeriodStart string  `json:"period_start"` // the current period's start (none: the key's creation)
	ResetsAt    *string `json:"resets_at"`    // the next period's start; null for none
	SpentUSD    string  `json:"spent_usd"`    // settled charges in the current period
	// RemainingUSD is what the key may still hold in its period: the limit
	// minus the spend and the open holds, never below 0; null: no limit.
	RemainingUSD *string     `json:"remaining_usd"`
	HeldUSD      string      `json:"held_usd"` // the key's open holds
	Account      AccountInfo `json:"account"`
}

// AccountInfo is the account of a key as its holder sees it.
type AccountInfo struct {
	ID           string  `json:"id"`
	BalanceUSD   string  `json:"balance_usd"`
	HeldUSD      string  `json:"held_usd"`      // open holds of every key of the account
	AvailableUSD string  `json:"available_usd"` // balance minus holds: what new calls can hold
	AlertBelow   *string `json:"alert_below_usd"`
	// LowBalance: the available credit is under the alert threshold.
	LowBalance bool `json:"low_balance"`
}

// holderAccount is holder's key with its account's balance.
func (g *Gateway) holderAccount(r *http.Request, info *reqInfo) (store.Key, store.Account, error) {
	k, err := g.holder(r, info)
	if err != nil {
		return store.Key{}, store.Account{}, err
	}
	a, err := g.store.Balance(r.Context(), k.Account)
	return k, a, err
}

func (g *Gateway) handleKey(w http.ResponseWriter, r *http.Request, _ httprouter.Params, info *reqInfo) error {
	k, a, err := g.holderAccount(r, info)
	if err != nil {
		return err
	}
	return writePrivate(w, keyInfo(k, a, g.now()))
}

func keyInfo(k store.Key, a store.Account, now time.Time) KeyInfo {
	v := KeyInfo{
		Object: "key", ID: k.ID, Label: k.Label, Route: k.Route, Created: timeText(k.Created),
		Expires: optTime(k.Expires), LimitReset: periodName(k.Reset), PeriodStart: timeText(k.Created),
		SpentUSD: k.SpentAt(now).Fixed(), HeldUSD: k.Held.Fixed(),
		Account: AccountInfo{
			ID: a.ID, BalanceUSD: a.Balance.Fixed(), HeldUSD: a.Held.Fixed(), AvailableUSD: a.Available().Fixed(),
			LowBalance: a.AlertBelow > 0 && a.Available() < a.AlertBelow,
		},
	}
	if k.Limit > 0 {
		v.LimitUSD = optUSD(k.Limit)
		v.RemainingUSD = optUSD(k.RemainingAt(now))
	}
	if k.Reset != store.ResetNever {
		start := store.PeriodStart(k.Reset, now)
		v.PeriodStart = timeText(start)
		v.ResetsAt = optTime(nextPeriod(k.Reset, start))
	}
	if a.AlertBelow > 0 {
		v.Account.AlertBelow = optUSD(a.AlertBelow)
	}
	return v
}

// periodName names a reset period as GET /v1/key shows it: "none" for
// ResetNever.
func periodName(reset string) string {
	if reset == store.ResetNever {
		return "none"
	}
	return reset
}

// nextPeriod is when the period of reset that began at start ends.
func nextPeriod(reset string, start time.Time) time.Time {
	switch reset {
	case store.ResetDaily:
		return start.AddDate(0, 0, 1)
	case store.ResetWeekly:
		return start.AddDate(0, 0, 7)
	case store.ResetMonthly:
		return start.AddDate(0, 1, 0)
	}
	return time.Time{}
}

// timeText is t in RFC 3339, UTC, with as many fraction digits as it has.
func timeText(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := timeText(t)
	return &s
}

func optUSD(n pricing.Nano) *string {
	s := n.Fixed()
	return &s
}

// GenerationInfo is GET /v1/generations/{id}: one ended call of the
// caller's account — what it used and cost, never its content.
type GenerationInfo struct {
	Object    string        `json:"object"` // "generation"
	ID        string        `json:"id"`     // the call's X-Request-Id
	KeyID     string        `json:"key_id"`
	Model     string        `json:"model"`
	Endpoint  string        `json:"endpoint"`
	Route     string        `json:"route"`
	Status    string        `json:"status"` // settled, released (failed: not charged), recovered
	Usage     pricing.Usage `json:"usage"`
	ChargeUSD string        `json:"charge_usd"`
	HoldUSD   string        `json:"hold_usd"` // what the call held while it ran
	// Estimated: the usage was estimated (a cut stream, an answer without
	// usage); the note says why.
	Estimated bool   `json:"estimated"`
	Note      string `json:"note"`
	Created   string `json:"created"` // when the ledger recorded the call's end
}

// maxGenerationID bounds the id a generation is looked up by; a longer
// one is unknown without asking the store.
const maxGenerationID = 128

// recoveredNote stands for the note of a hold released at start-up, which
// names the process that took it.
const recoveredNote = "the gateway stopped before the call was settled; it was not charged"

func (g *Gateway) handleGeneration(w http.ResponseWriter, r *http.Request, ps httprouter.Params, info *reqInfo) error {
	k, err := g.holder(r, info)
	if err != nil {
		return err
	}
	id := ps.ByName("id")
	missing := apierr.NotFound("no generation %s for this account (a call has one once it has ended; GET it with the X-Request-Id of its answer)", apierr.Quote(id))
	if len(id) > maxGenerationID {
		return missing
	}
	gen, err := g.store.Generation(r.Context(), k.Account, id)
	if errors.Is(err, store.ErrNotFound) && g.bill.WaitStream(r.Context(), id, k.Account) {
		// A stream of this process whose last event the client has read
		// is settled just after it: read again once it is.
		gen, err = g.store.Generation(r.Context(), k.Account, id)
	}
	if errors.Is(err, store.ErrNotFound) {
		return missing // unknown or another account's: the same answer
	}
	if err != nil {
		return err
	}
	v := GenerationInfo{
		Object: "generation", ID: gen.RequestID, KeyID: gen.KeyID, Model: gen.Model, Endpoint: gen.Endpoint,
		Route: gen.Route, Status: gen.State, Usage: gen.Usage, ChargeUSD: gen.Charge.Fixed(),
		HoldUSD: gen.HoldAmount.Fixed(), Estimated: gen.Estimated, Note: gen.Note, Created: timeText(gen.Time),
	}
	if gen.State == store.OutcomeRecovered {
		v.Note = recoveredNote
	}
	return writePrivate(w, v)
}

// BillingSubscription is GET /v1/dashboard/billing/subscription in the shape
// OpenAI answered it and one-api and new-api still do, for chat front-ends
// that poll it for a balance display. The three limits are the same
// amount: what the key can still spend — the account's available credit
// (never below 0), or what remains of the key's spend limit when that is
// less. access_until is the key's expiry (Unix seconds; 0: none).
type BillingSubscription struct {
	Object             string      `json:"object"` // "billing_subscription"
	HasPaymentMethod   bool        `json:"has_payment_method"`
	SoftLimitUSD       json.Number `json:"soft_limit_usd"`
	HardLimitUSD       json.Number `json:"hard_limit_usd"`
	SystemHardLimitUSD json.Number `json:"system_hard_limit_usd"`
	AccessUntil        int64       `json:"access_until"`
}

func (g *Gateway) handleSubscription(w http.ResponseWriter, r *http.Request, _ httprouter.Params, info *reqInfo) error {
	k, a, err := g.holderAccount(r, info)
	if err != nil {
		return err
	}
	n := usdNumber(spendable(k, a, g.now()))
	v := BillingSubscription{
		Object: "billing_subscription", HasPaymentMethod: true,
		SoftLimitUSD: n, HardLimitUSD: n, SystemHardLimitUSD: n,
	}
	if !k.Expires.IsZero() {
		v.AccessUntil = k.Expires.Unix()
	}
	return writePrivate(w, v)
}

// spendable is what key k of account a can still spend at now: the
// account's available credit, never below 0, or the key's remaining limit
// when it has one that is lower.
func spendable(k store.Key, a store.Account, now time.Time) pricing.Nano {
	n := max(a.Available(), 0)
	if rem := k.RemainingAt(now); rem >= 0 && rem < n {
		n = rem
	}
	return n
}

// usdNumber is n in US dollars as a JSON number, exact (the shortest
// decimal text of n).
func usdNumber(n pricing.Nano) json.Number { return json.Number(n.String()) }

// centsNumber is n in US cents as a JSON number, exact: one cent is
// 10,000,000 nano-USD, so seven decimals at most.
func centsNumber(n pricing.Nano) json.Number {
	const nanoPerCent = uint64(pricing.NanoPerUSD / 100)
	var b []byte
	u := uint64(n)
	if n < 0 {
		b = append(b, '-')
		u = -u // exact for math.MinInt64 too
	}
	b = strconv.AppendUint(b, u/nanoPerCent, 10)
	if frac := u % nanoPerCent; frac != 0 {
		digits := []byte(strconv.FormatUint(frac+nanoPerCent, 10)[1:]) // seven digits, leading zeros kept
		for digits[len(digits)-1] == '0' {
			digits = digits[:len(digits)-1]
		}
		b = append(append(b, '.'), digits...)
	}
	return json.Number(b)
}

// BillingUsage is GET /v1/dashboard/billing/usage in the shape one-api and
// new-api answer it: total_usage in US cents — here the account's charges
// minus its refunds in [start_date, end_date), UTC.
type BillingUsage struct {
	Object     string      `json:"object"` // "list"
	TotalUsage json.Number `json:"total_usage"`
}

// maxUsageDays bounds the range of a usage read, as OpenAI's endpoint did.
const maxUsageDays = 100

func (g *Gateway) handleUsage(w http.ResponseWriter, r *http.Request, _ httprouter.Params, info *reqInfo) error {
	k, err := g.holder(r, info)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	from, to, err := usageRange(q.Get("start_date"), q.Get("end_date"))
	if err != nil {
		return err
	}
	total, err := g.spentBetween(r.Context(), k.Account, from, to)
	if err != nil {
		return err
	}
	return writePrivate(w, BillingUsage{Object: "list", TotalUsage: centsNumber(total)})
}

// usageRange reads the dates of a usage read: [start, end), at most
// maxUsageDays days.
func usageRange(start, end string) (from, to time.Time, err error) {
	from, err = queryDate("start_date", start)
	if err != nil {
		return
	}
	if to, err = queryDate("end_date", end); err != nil {
		return
	}
	if !to.After(from) {
		return from, to, apierr.BadRequest("end_date", "end_date must be after start_date: the range is [start_date, end_date), end_date not included")
	}
	if days := to.Sub(from) / (24 * time.Hour); days > maxUsageDays {
		return from, to, apierr.BadRequest("end_date", "the range from start_date to end_date is %d days; at most %d", days, maxUsageDays)
	}
	return from, to, nil
}

// queryDate reads query parameter field, a date YYYY-MM-DD, as 00:00 UTC
// of that day.
func queryDate(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, apierr.BadRequest(field, "%s is required: a date YYYY-MM-DD (UTC)", field)
	}
	t, ok := parseDate(v)
	if !ok {
		return time.Time{}, apierr.BadRequest(field, "%s must be a date YYYY-MM-DD (UTC), not %s", field, apierr.Quote(v))
	}
	return t, nil
}

// parseDate reads a calendar date, YYYY-MM-DD exactly, as 00:00 UTC of
// that day.
func parseDate(s string) (time.Time, bool) {
	if len(s) != len(time.DateOnly) {
		return time.Time{}, false
	}
	t, err := time.Parse(time.DateOnly, s)
	return t, err == nil
}

// spentBetween is what account was charged, minus what was refunded, in
// [from, to): the negated sum of its charge and refund entries.
func (g *Gateway) spentBetween(ctx context.Context, account string, from, to time.Time) (pricing.Nano, error) {
	var total pricing.Nano
	err := g.store.Journal(ctx, account, from, to, func(e store.Entry) error {
		if e.Kind == store.KindCharge || e.Kind == store.KindRefund {
			total -= e.Amount
		}
		return nil
	})
	return total, err
}
