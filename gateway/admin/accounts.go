package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/wire"
)

// AccountView is an account as the admin API shows it.
type AccountView struct {
	ID           string `json:"id"`
	BalanceUSD   string `json:"balance_usd"`   // nine decimals, e.g. "9.999871250"
	HeldUSD      string `json:"held_usd"`      // open holds
	AvailableUSD string `json:"available_usd"` // balance minus holds
	BalanceNano  int64  `json:"balance_nano"`
	HeldNano     int64  `json:"held_nano"`
	Created      string `json:"created,omitempty"` // RFC 3339, UTC
	// AlertBelowUSD is the low-balance threshold (absent: none); BelowAlert
	// says whether the available credit is under it now.
	AlertBelowUSD string `json:"alert_below_usd,omitempty"`
	BelowAlert    bool   `json:"below_alert"`
}

func accountView(a store.Account) AccountView {
	v := AccountView{
		ID: a.ID, BalanceUSD: a.Balance.Fixed(), HeldUSD: a.Held.Fixed(), AvailableUSD: a.Available().Fixed(),
		BalanceNano: int64(a.Balance), HeldNano: int64(a.Held),
	}
	if a.AlertBelow > 0 {
		v.AlertBelowUSD = a.AlertBelow.Fixed()
		v.BelowAlert = a.Available() < a.AlertBelow
	}
	if !a.Created.IsZero() {
		v.Created = a.Created.UTC().Format(time.RFC3339)
	}
	return v
}

// maxAccounts bounds a page of GET /admin/accounts (one more is asked
// of the store, to know whether there is a next page).
const maxAccounts = 500

// listAccounts lists accounts in id order, a page at a time: limit
// (1 to 500, default 100) after the id after; has_more says whether a
// next page exists, asked for with after = the last id.
func (a *API) listAccounts(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAccounts {
			return apierr.BadRequest("limit", "limit must be an integer from 1 to %d", maxAccounts)
		}
		limit = n
	}
	after := q.Get("after")
	if after != "" && !validAccountID(after) {
		return apierr.BadRequest("after", "after must be an account id (1–64 characters of letters, digits, '-', '_' or '.')")
	}
	as, err := a.d.Store.ListAccounts(r.Context(), after, limit+1)
	if err != nil {
		return err
	}
	more := len(as) > limit
	if more {
		as = as[:limit]
	}
	out := make([]AccountView, len(as))
	for i, acc := range as {
		out[i] = accountView(acc)
	}
	return wire.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out, "has_more": more})
}

func (a *API) createAccount(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var req struct {
		ID string `json:"id"`
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if !validAccountID(req.ID) {
		return apierr.BadRequest("id", "id must be 1–64 characters of letters, digits, '-', '_' or '.'")
	}
	acc, err := a.d.Store.CreateAccount(r.Context(), req.ID)
	if err != nil {
		return storeErr(err, "account "+apierr.Quote(req.ID))
	}
	return wire.WriteJSON(w, http.StatusCreated, accountView(acc))
}

func validAccountID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func (a *API) balance(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	return a.writeBalance(w, r, ps.ByName("account"))
}

// writeBalance answers with account id's balance, once the calls it has
// in flight have settled.
func (a *API) writeBalance(w http.ResponseWriter, r *http.Request, id string) error {
	a.d.Settled(r.Context(), id)
	acc, err := a.d.Store.Balance(r.Context(), id)
	if err != nil {
		return storeErr(err, "account "+apierr.Quote(id))
	}
	return wire.WriteJSON(w, http.StatusOK, accountView(acc))
}

func (a *API) handleCredit(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	var req struct {
		USD  string `json:"usd"`
		Note string `json:"note"`
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	amt, err := pricing.ParseUSD(req.USD)
	if err != nil {
		return apierr.BadRequest("usd", "usd: %s", apierr.Bound(err.Error(), apierr.MaxMessage))
	}
	if amt <= 0 {
		return apierr.BadRequest("usd", "usd must be more than zero")
	}
	id := ps.ByName("account")
	if err := a.credit(r.Context(), id, amt, req.Note); err != nil {
		return err
	}
	return a.writeBalance(w, r, id)
}

// credit adds amt (> 0) to account with note; the admin API and the
// console share it.
func (a *API) credit(ctx context.Context, id string, amt pricing.Nano, note string) error {
	if !validAccountID(id) {
		return apierr.BadRequest("account", "invalid account id")
	}
	if _, err := a.d.Store.Credit(ctx, id, amt, note); err != nil {
		return storeErr(err, "account "+apierr.Quote(id))
	}
	return nil
}

// EntryView is a journal entry as the admin API shows it: the store's entry
// (amounts as exact USD numbers) plus the amount as nine-decimal text.
type EntryView struct {
	store.Entry
	AmountText string `json:"amount_text"`
}

func (a *API) charges(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return apierr.BadRequest("limit", "limit must be an integer from 1 to 10000")
		}
		limit = n
	}
	id := ps.ByName("account")
	a.d.Settled(r.Context(), id)
	if _, err := a.d.Store.Balance(r.Context(), id); err != nil {
		return storeErr(err, "account "+apierr.Quote(id))
	}
	es, err := a.d.Store.Charges(r.Context(), id, limit)
	if err != nil {
		return err
	}
	out := make([]EntryView, len(es))
	for i, e := range es {
		out[i] = EntryView{Entry: e, AmountText: e.Amount.Fixed()}
	}
	return wire.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

// updateAccount changes an account's settings: alert_below_usd, its
// low-balance threshold (decimal USD; 0 for none).
func (a *API) updateAccount(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	var req struct {
		AlertBelowUSD json.RawMessage `json:"alert_below_usd"`
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	id := ps.ByName("account")
	if !validAccountID(id) {
		return apierr.BadRequest("account", "invalid account id")
	}
	if req.AlertBelowUSD == nil {
		return apierr.BadRequest("body", "nothing to change: give alert_below_usd")
	}
	below, err := parseUSDField("alert_below_usd", req.AlertBelowUSD)
	if err != nil {
		return err
	}
	if _, err := a.d.Store.SetAlert(r.Context(), id, below); err != nil {
		return storeErr(err, "account "+apierr.Quote(id))
	}
	return a.writeBalance(w, r, id)
}

// SetupValidity is how long a console set-password link works.
const SetupValidity = 24 * time.Hour

// LoginView is the answer to POST /admin/accounts/{id}/login: the login
// and its one-time set-password link, shown in this answer only.
type LoginView struct {
	Email     string `json:"email"`
	Account   string `json:"account"`
	SetupLink string `json:"setup_link"`
	Expires   string `json:"expires"` // RFC 3339, UTC
}

// issueLogin gives an account holder a console login: it creates or
// keeps the login of the email and sets a new one-time setup token (the
// store keeps its hash; the token is in the answer and nowhere else, never
// in a log). 400 names email, 404 an unknown account, 409 an email that is
// another account's.
func (a *API) issueLogin(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	var req struct {
		Email string `json:"email"`
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	email, err := store.NormalizeEmail(req.Email)
	if err != nil {
		return apierr.BadRequest("email", "email must be one address such as alice@example.com, without a name or angle brackets, at most %d bytes", store.MaxEmailLen)
	}
	id := ps.ByName("account")
	if !validAccountID(id) {
		return apierr.NotFound("account %s not found", apierr.Quote(id))
	}
	token, hash, err := store.NewSetupToken()
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	l, err := a.d.Store.IssueLogin(r.Context(), email, id, hash, now.Add(SetupValidity), now)
	if errors.Is(err, store.ErrExists) {
		return apierr.Errf(http.StatusConflict, "invalid_request_error", "exists", "%s is already the console login of another account", apierr.Quote(email))
	}
	if err != nil {
		return storeErr(err, "account "+apierr.Quote(id))
	}
	return wire.WriteJSON(w, http.StatusCreated, LoginView{Email: l.Email, Account: l.Account,
		SetupLink: setupLink(a.d.Config.Console.PublicURL, r, token), Expires: l.SetupExpires.UTC().Format(time.RFC3339)})
}

// setupLink is the console's set-password link for token: under publicURL
// (console.public_url) when it is set, else under the address r came to,
// https only when r came over TLS (X-Forwarded-Proto is a client's to set,
// so it is not believed).
func setupLink(publicURL string, r *http.Request, token string) string {
	base := strings.TrimRight(publicURL, "/")
	if base == "" && r.Host != "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	return base + "/console/setup/" + token
}
