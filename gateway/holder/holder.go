package holder

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
	"github.com/modelrelay/modelrelay/wire"
)

// Store is what the holder's reads need of the store.
type Store interface {
	KeyByHash(ctx context.Context, hash string) (store.Key, error)
	Balance(ctx context.Context, account string) (store.Account, error)
	store.Books
}

// Deps is what the holder's reads need of the running gateway. Every field
// is required.
type Deps struct {
	Store Store
	Now   func() time.Time
	// Settled waits until the calls of account answered so far have
	// settled (briefly; it gives up when ctx ends).
	Settled func(ctx context.Context, account string)
	// Evict drops key id's record from the key cache (a revoked key).
	Evict func(id string)
	// Cache puts the store's fresh record of a key in the key cache.
	Cache func(k store.Key)
	// StreamEnding waits until the stream of request rid, a call of
	// account in this process, has ended and been settled; it reports
	// whether rid was such a stream, not yet ended.
	StreamEnding func(ctx context.Context, rid, account string) bool
}

// API serves the holder's reads over Deps.
type API struct {
	d Deps
}

// New makes the holder's reads of d.
func New(d Deps) *API { return &API{d: d} }

// Auth authenticates the caller of r by its sk- key and takes a token from
// the key's rate-limit bucket, as for a relayed call (the gateway records
// the key in its access log).
type Auth func(r *http.Request) (store.Key, error)

// Handler is a holder's read: it writes its answer, or returns the error
// the gateway's handler wrapper writes in the error shape
// (docs/api.md#errors).
type Handler func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, auth Auth) error

// What a key holder can read of its key and account: authenticated by the
// sk- key as a Bearer token, like a relayed call, and rate-limited by the
// key's bucket. Every read first waits for the account's answered calls to
// settle (read-after-answer, as the admin reads do), so that it shows the
// charge of every call whose answer came before it. Amounts are exact:
// decimal USD text with nine decimals formatted from nano-USD, or — in the
// OpenAI billing shapes that chat front-ends poll — JSON numbers written
// from the same exact decimal text, never through a float.
//
// Routes mounts them on r, each wrapped by wrap (the gateway's request id,
// error writing and access log; name is the endpoint's name in the log and
// the metrics).
func (a *API) Routes(r *httprouter.Router, wrap func(name string, h Handler) httprouter.Handle) {
	r.GET("/v1/key", wrap("key", a.key))
	r.GET("/v1/generations/:id", wrap("generation", a.generation))
	r.GET("/v1/dashboard/billing/subscription", wrap("billing_subscription", a.subscription))
	r.GET("/v1/dashboard/billing/usage", wrap("billing_usage", a.usage))
}

// holder authenticates a key holder's read and returns the key as the store
// has it now, after the account's answered calls have settled: not the key
// cache's copy, whose spend may be 10 s old.
func (a *API) holder(r *http.Request, auth Auth) (store.Key, error) {
	ctx := r.Context()
	k, err := auth(r)
	if err != nil {
		return store.Key{}, err
	}
	a.d.Settled(ctx, k.Account)
	fresh, err := a.d.Store.KeyByHash(ctx, k.Hash)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Key{}, apierr.Unauthorized("invalid API key")
	case err != nil:
		return store.Key{}, err
	case fresh.Revoked:
		a.d.Evict(fresh.ID)
		return store.Key{}, apierr.Unauthorized("this API key has been revoked")
	}
	a.d.Cache(fresh)
	return fresh, nil
}

// writePrivate writes v as JSON that no cache may keep: it is one key's.
func writePrivate(w http.ResponseWriter, v any) error {
	w.Header().Set("Cache-Control", "no-store")
	return wire.WriteJSON(w, http.StatusOK, v)
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
func (a *API) holderAccount(r *http.Request, auth Auth) (store.Key, store.Account, error) {
	k, err := a.holder(r, auth)
	if err != nil {
		return store.Key{}, store.Account{}, err
	}
	acc, err := a.d.Store.Balance(r.Context(), k.Account)
	return k, acc, err
}

func (a *API) key(w http.ResponseWriter, r *http.Request, _ httprouter.Params, auth Auth) error {
	k, acc, err := a.holderAccount(r, auth)
	if err != nil {
		return err
	}
	return writePrivate(w, keyInfo(k, acc, a.d.Now()))
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

func (a *API) generation(w http.ResponseWriter, r *http.Request, ps httprouter.Params, auth Auth) error {
	k, err := a.holder(r, auth)
	if err != nil {
		return err
	}
	id := ps.ByName("id")
	missing := apierr.NotFound("no generation %s for this account (a call has one once it has ended; GET it with the X-Request-Id of its answer)", apierr.Quote(id))
	if len(id) > maxGenerationID {
		return missing
	}
	gen, err := a.d.Store.Generation(r.Context(), k.Account, id)
	if errors.Is(err, store.ErrNotFound) && a.d.StreamEnding(r.Context(), id, k.Account) {
		// A stream of this process whose last event the client has read
		// is settled just after it: read again once it is.
		gen, err = a.d.Store.Generation(r.Context(), k.Account, id)
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

func (a *API) subscription(w http.ResponseWriter, r *http.Request, _ httprouter.Params, auth Auth) error {
	k, acc, err := a.holderAccount(r, auth)
	if err != nil {
		return err
	}
	n := usdNumber(spendable(k, acc, a.d.Now()))
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

// CentsNumber is n in US cents as a JSON number, exact: one cent is
// 10,000,000 nano-USD, so seven decimals at most.
func CentsNumber(n pricing.Nano) json.Number {
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

func (a *API) usage(w http.ResponseWriter, r *http.Request, _ httprouter.Params, auth Auth) error {
	k, err := a.holder(r, auth)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	from, to, err := usageRange(q.Get("start_date"), q.Get("end_date"))
	if err != nil {
		return err
	}
	total, err := a.spentBetween(r.Context(), k.Account, from, to)
	if err != nil {
		return err
	}
	return writePrivate(w, BillingUsage{Object: "list", TotalUsage: CentsNumber(total)})
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
func (a *API) spentBetween(ctx context.Context, account string, from, to time.Time) (pricing.Nano, error) {
	var total pricing.Nano
	err := a.d.Store.Journal(ctx, account, from, to, func(e store.Entry) error {
		if e.Kind == store.KindCharge || e.Kind == store.KindRefund {
			total -= e.Amount
		}
		return nil
	})
	return total, err
}
