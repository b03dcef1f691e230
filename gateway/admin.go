package gateway

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// The admin API lives under /admin/ and takes the admin token as a Bearer
// token; an sk- API key never opens it.
func (g *Gateway) adminRoutes(r *httprouter.Router) {
	r.POST("/admin/accounts", g.handle("admin", g.admin(g.adminCreateAccount)))
	r.GET("/admin/accounts", g.handle("admin", g.admin(g.adminListAccounts)))
	r.GET("/admin/accounts/:account", g.handle("admin", g.admin(g.adminBalance)))
	r.POST("/admin/accounts/:account/update", g.handle("admin", g.admin(g.adminUpdateAccount)))
	r.POST("/admin/accounts/:account/credit", g.handle("admin", g.admin(g.adminCredit)))
	r.GET("/admin/accounts/:account/charges", g.handle("admin", g.admin(g.adminCharges)))
	r.POST("/admin/accounts/:account/login", g.handle("admin", g.admin(g.adminIssueLogin)))
	r.POST("/admin/keys", g.handle("admin", g.admin(g.adminCreateKey)))
	r.GET("/admin/keys", g.handle("admin", g.admin(g.adminListKeys)))
	r.GET("/admin/keys/:id", g.handle("admin", g.admin(g.adminKey)))
	r.POST("/admin/keys/revoke", g.handle("admin", g.admin(g.adminRevokeKey)))
	r.POST("/admin/keys/update", g.handle("admin", g.admin(g.adminUpdateKey)))
	r.GET("/admin/lines", g.handle("admin", g.admin(g.adminLines)))
}

func (g *Gateway) admin(fn handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, info *reqInfo) error {
		scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return apierr.Unauthorized("the admin API needs \"Authorization: Bearer <admin token>\"")
		}
		if strings.HasPrefix(tok, "sk-") {
			return apierr.Unauthorized("API keys cannot use the admin API; use the admin token")
		}
		if !g.isAdminToken(tok) {
			return apierr.Unauthorized("invalid admin token")
		}
		return fn(w, r, ps, info)
	}
}

// isAdminToken compares tok with the admin token in constant time; the
// admin API and the console's operator sign-in both ask it.
func (g *Gateway) isAdminToken(tok string) bool {
	return subtle.ConstantTimeCompare([]byte(tok), []byte(g.cfg.AdminToken)) == 1
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return nil
}

func readJSON(r *http.Request, v any) error {
	body, err := readBody(r, 1<<20)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return apierr.BadRequest(te.Field, "%s: wrong type", te.Field)
		}
		return apierr.BadRequest("body", "invalid JSON body: %s", apierr.Bound(err.Error(), apierr.MaxMessage))
	}
	return nil
}

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

// maxAdminAccounts bounds a page of GET /admin/accounts (one more is asked
// of the store, to know whether there is a next page).
const maxAdminAccounts = 500

// adminListAccounts lists accounts in id order, a page at a time: limit
// (1 to 500, default 100) after the id after; has_more says whether a
// next page exists, asked for with after = the last id.
func (g *Gateway) adminListAccounts(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *reqInfo) error {
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAdminAccounts {
			return apierr.BadRequest("limit", "limit must be an integer from 1 to %d", maxAdminAccounts)
		}
		limit = n
	}
	after := q.Get("after")
	if after != "" && !validAccountID(after) {
		return apierr.BadRequest("after", "after must be an account id (1–64 characters of letters, digits, '-', '_' or '.')")
	}
	as, err := g.store.ListAccounts(r.Context(), after, limit+1)
	if err != nil {
		return err
	}
	more := len(as) > limit
	if more {
		as = as[:limit]
	}
	out := make([]AccountView, len(as))
	for i, a := range as {
		out[i] = accountView(a)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out, "has_more": more})
}

func storeErr(err error, what string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apierr.NotFound("%s not found", what)
	case errors.Is(err, store.ErrExists):
		return apierr.Errf(http.StatusConflict, "invalid_request_error", "exists", "%s already exists", what)
	}
	return err
}

func (g *Gateway) adminCreateAccount(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *reqInfo) error {
	var req struct {
		ID string `json:"id"`
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if !validAccountID(req.ID) {
		return apierr.BadRequest("id", "id must be 1–64 characters of letters, digits, '-', '_' or '.'")
	}
	a, err := g.store.CreateAccount(r.Context(), req.ID)
	if err != nil {
		return storeErr(err, "account "+apierr.Quote(req.ID))
	}
	return writeJSON(w, http.StatusCreated, accountView(a))
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

func (g *Gateway) adminBalance(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ *reqInfo) error {
	return g.writeBalance(w, r, ps.ByName("account"))
}

// writeBalance answers with account id's balance, once the calls it has
// in flight have settled.
func (g *Gateway) writeBalance(w http.ResponseWriter, r *http.Request, id string) error {
	g.bill.WaitSettled(r.Context(), id)
	a, err := g.store.Balance(r.Context(), id)
	if err != nil {
		return storeErr(err, "account "+apierr.Quote(id))
	}
	return writeJSON(w, http.StatusOK, accountView(a))
}

func (g *Gateway) adminCredit(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ *reqInfo) error {
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
	if err := g.credit(r.Context(), id, amt, req.Note); err != nil {
		return err
	}
	return g.writeBalance(w, r, id)
}

// credit adds amt (> 0) to account with note; the admin API and the
// console share it.
func (g *Gateway) credit(ctx context.Context, id string, amt pricing.Nano, note string) error {
	if !validAccountID(id) {
		return apierr.BadRequest("account", "invalid account id")
	}
	if _, err := g.store.Credit(ctx, id, amt, note); err != nil {
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

func (g *Gateway) adminCharges(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ *reqInfo) error {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return apierr.BadRequest("limit", "limit must be an integer from 1 to 10000")
		}
		limit = n
	}
	id := ps.ByName("account")
	g.bill.WaitSettled(r.Context(), id)
	if _, err := g.store.Balance(r.Context(), id); err != nil {
		return storeErr(err, "account "+apierr.Quote(id))
	}
	es, err := g.store.Charges(r.Context(), id, limit)
	if err != nil {
		return err
	}
	out := make([]EntryView, len(es))
	for i, e := range es {
		out[i] = EntryView{Entry: e, AmountText: e.Amount.Fixed()}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

// KeyView is a key record without its hash: its settings and, for the
// period that contains now, its spend. Amounts are nine-decimal USD text.
type KeyView struct {
	ID      string   `json:"id"`
	Account string   `json:"account"`
	Route   string   `json:"route"`
	Exclude []string `json:"exclude"`
	Revoked bool     `json:"revoked"`
	Created string   `json:"created"`
	Label   string   `json:"label"`
	// LimitUSD is the spend limit per period (absent: none); LimitReset its
	// period: daily, weekly, monthly (from 00:00 UTC) or none.
	LimitUSD   string   `json:"limit_usd,omitempty"`
	LimitReset string   `json:"limit_reset"`
	Expires    string   `json:"expires,omitempty"` // RFC 3339, UTC; absent: never
	Expired    bool     `json:"expired"`
	Allow      []string `json:"allow"` // client networks; empty: any
	// SpentUSD is what the key's calls were charged in the current period,
	// HeldUSD its open holds, RemainingUSD what it may still hold (absent
	// without a limit). PeriodStart and ResetsAt bound a periodic limit's
	// current period.
	SpentUSD     string `json:"spent_usd"`
	HeldUSD      string `json:"held_usd"`
	RemainingUSD string `json:"remaining_usd,omitempty"`
	PeriodStart  string `json:"period_start,omitempty"`
	ResetsAt     string `json:"resets_at,omitempty"`
	Key          string `json:"key,omitempty"` // only in the answer that creates it
}

func keyView(k store.Key, now time.Time) KeyView {
	v := KeyView{
		ID: k.ID, Account: k.Account, Route: k.Route, Exclude: k.Exclude, Revoked: k.Revoked,
		Created: k.Created.UTC().Format(time.RFC3339), Label: k.Label, LimitReset: resetName(k.Reset),
		Expired: k.ExpiredAt(now), Allow: k.Allow, SpentUSD: k.SpentAt(now).Fixed(), HeldUSD: k.Held.Fixed(),
	}
	if v.Exclude == nil {
		v.Exclude = []string{}
	}
	if v.Allow == nil {
		v.Allow = []string{}
	}
	if k.Limit > 0 {
		v.LimitUSD = k.Limit.Fixed()
		v.RemainingUSD = k.RemainingAt(now).Fixed()
	}
	if !k.Expires.IsZero() {
		v.Expires = k.Expires.UTC().Format(time.RFC3339)
	}
	if next, ok := apierr.NextReset(k.Reset, now); ok {
		v.PeriodStart = store.PeriodStart(k.Reset, now).Format(time.RFC3339)
		v.ResetsAt = next.Format(time.RFC3339)
	}
	return v
}

func (g *Gateway) adminCreateKey(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *reqInfo) error {
	var req struct {
		Account string   `json:"account"`
		Route   string   `json:"route"`
		Exclude []string `json:"exclude"`
		keySettings
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if req.Account == "" {
		return apierr.BadRequest("account", "account is required")
	}
	k, plain, err := g.createKey(r.Context(), req.Account, req.Route, req.Exclude, req.keySettings)
	if err != nil {
		return err
	}
	v := keyView(k, k.Created)
	v.Key = plain
	return writeJSON(w, http.StatusCreated, v)
}

// createKey makes a key on account with the admin API's rules (a
// configured route or auto, excluded models sold here, settings checked by
// keySettings.update) and returns it with its plaintext; the admin API and
// the console share it.
func (g *Gateway) createKey(ctx context.Context, account, route string, exclude []string, s keySettings) (store.Key, string, error) {
	if route == "" {
		return store.Key{}, "", apierr.BadRequest("route", "route is required (a route name, or \"auto\")")
	}
	if route != store.AutoRoute && !g.routeExists(route) {
		return store.Key{}, "", apierr.BadRequest("route", "route %s is not configured; routes: %s, auto", apierr.Quote(route), strings.Join(g.routeNames(), ", "))
	}
	cat := g.host.Catalog()
	for _, m := range exclude {
		if _, ok := cat.Model(m); !ok {
			return store.Key{}, "", apierr.BadRequest("exclude", "exclude: %s is not a model sold here", apierr.Quote(m))
		}
	}
	now := g.now()
	u, err := s.update(now)
	if err != nil {
		return store.Key{}, "", err
	}
	if _, err := g.store.Balance(ctx, account); err != nil {
		return store.Key{}, "", storeErr(err, "account "+apierr.Quote(account))
	}
	plain, id, hash, err := store.NewKey()
	if err != nil {
		return store.Key{}, "", err
	}
	k := store.Key{ID: id, Hash: hash, Account: account, Route: route, Exclude: exclude, Created: now}
	applyUpdate(&k, u)
	if err := g.store.CreateKey(ctx, k); err != nil {
		return store.Key{}, "", storeErr(err, "key")
	}
	g.publishKey(ctx, k.ID)
	return k, plain, nil
}

func (g *Gateway) routeExists(name string) bool {
	for _, r := range g.cfg.Routes {
		if r.Name == name {
			return true
		}
	}
	return false
}

func (g *Gateway) routeNames() []string {
	out := make([]string, 0, len(g.cfg.Routes))
	for _, r := range g.cfg.Routes {
		out = append(out, r.Name)
	}
	sort.Strings(out)
	return out
}

func (g *Gateway) adminListKeys(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *reqInfo) error {
	account := r.URL.Query().Get("account")
	if account != "" {
		g.bill.WaitSettled(r.Context(), account) // the spend of the calls it answered
	}
	ks, err := g.store.ListKeys(r.Context(), account)
	if err != nil {
		return err
	}
	now := g.now()
	out := make([]KeyView, len(ks))
	for i, k := range ks {
		out[i] = keyView(k, now)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

// adminKey shows one key by its id, once the calls its account was
// answered have settled (as the account's balance is shown).
func (g *Gateway) adminKey(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ *reqInfo) error {
	id := ps.ByName("id")
	k, err := g.keyByID(r, "", id)
	if err != nil {
		return err
	}
	g.bill.WaitSettled(r.Context(), k.Account)
	if k, err = g.keyByID(r, k.Account, id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, keyView(k, g.now()))
}

// keyByID finds a key by its id among account's keys ("": every key). The
// store looks keys up by hash, so this lists them: an admin read, never on
// a call's path.
func (g *Gateway) keyByID(r *http.Request, account, id string) (store.Key, error) {
	if store.CheckID("key", id) != nil {
		return store.Key{}, apierr.BadRequest("id", "id must be a key id, key_…")
	}
	ks, err := g.store.ListKeys(r.Context(), account)
	if err != nil {
		return store.Key{}, err
	}
	for _, k := range ks {
		if k.ID == id {
			return k, nil
		}
	}
	return store.Key{}, apierr.NotFound("key %s not found", apierr.Quote(id))
}

func (g *Gateway) adminRevokeKey(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *reqInfo) error {
	var req keyRef
	if err := readJSON(r, &req); err != nil {
		return err
	}
	id, err := g.keyRefID(r, req)
	if err != nil {
		return err
	}
	k, err := g.revokeKey(r.Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, keyView(k, g.now()))
}

// revokeKey revokes key id and makes every replica drop its cached
// record at once, so the key stops working now.
func (g *Gateway) revokeKey(ctx context.Context, id string) (store.Key, error) {
	k, err := g.store.RevokeKey(ctx, id)
	if err != nil {
		return store.Key{}, storeErr(err, "key "+apierr.Quote(id))
	}
	g.keys.evictID(k.ID)
	g.publishKey(ctx, k.ID)
	return k, nil
}

// keyRef names a key in an admin request body: its id, or the key itself.
type keyRef struct {
	ID  string `json:"id"`
	Key string `json:"key"`
}

func (g *Gateway) keyRefID(r *http.Request, ref keyRef) (string, error) {
	if ref.Key != "" {
		k, err := g.store.KeyByHash(r.Context(), store.HashKey(ref.Key))
		if err != nil {
			return "", storeErr(err, "key")
		}
		return k.ID, nil
	}
	if ref.ID == "" {
		return "", apierr.BadRequest("id", "give the key's id or the key itself")
	}
	return ref.ID, nil
}

// adminUpdateKey changes a key's settings (the fields given; see
// keySettings) and keeps its spend. Every replica drops its cached record
// at once, as for a revocation.
func (g *Gateway) adminUpdateKey(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *reqInfo) error {
	var req struct {
		ID  string `json:"id"`
		Key string `json:"key"`
		keySettings
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	id, err := g.keyRefID(r, keyRef{ID: req.ID, Key: req.Key})
	if err != nil {
		return err
	}
	k, err := g.updateKey(r.Context(), id, req.keySettings)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, keyView(k, g.now()))
}

// updateKey changes key id's settings (keySettings.update's rules) and
// makes every replica drop its cached record.
func (g *Gateway) updateKey(ctx context.Context, id string, s keySettings) (store.Key, error) {
	u, err := s.update(g.now())
	if err != nil {
		return store.Key{}, err
	}
	if u == (store.KeyUpdate{}) {
		return store.Key{}, apierr.BadRequest("body", "nothing to change: give label, limit_usd, limit_reset, expires or allow")
	}
	k, err := g.store.UpdateKey(ctx, id, u)
	if err != nil {
		return store.Key{}, storeErr(err, "key "+apierr.Quote(id))
	}
	g.keys.evictID(k.ID)
	g.publishKey(ctx, k.ID)
	return k, nil
}

// adminUpdateAccount changes an account's settings: alert_below_usd, its
// low-balance threshold (decimal USD; 0 for none).
func (g *Gateway) adminUpdateAccount(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ *reqInfo) error {
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
	if _, err := g.store.SetAlert(r.Context(), id, below); err != nil {
		return storeErr(err, "account "+apierr.Quote(id))
	}
	return g.writeBalance(w, r, id)
}

func (g *Gateway) adminLines(w http.ResponseWriter, _ *http.Request, _ httprouter.Params, _ *reqInfo) error {
	return writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": g.lines.health()})
}

func keyMayCall(k store.Key, m pricing.Model) bool {
	if contains(k.Exclude, m.ID) {
		return false
	}
	if k.Route == store.AutoRoute {
		return true
	}
	_, ok := m.Routes[k.Route]
	return ok
}

// ownerOf is the vendor word before the first '-' of a model id.
func ownerOf(id string) string {
	if i := strings.IndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

// consoleSetupValidity is how long a console set-password link works.
const consoleSetupValidity = 24 * time.Hour

// LoginView is the answer to POST /admin/accounts/{id}/login: the login
// and its one-time set-password link, shown in this answer only.
type LoginView struct {
	Email     string `json:"email"`
	Account   string `json:"account"`
	SetupLink string `json:"setup_link"`
	Expires   string `json:"expires"` // RFC 3339, UTC
}

// adminIssueLogin gives an account holder a console login: it creates or
// keeps the login of the email and sets a new one-time setup token (the
// store keeps its hash; the token is in the answer and nowhere else, never
// in a log). 400 names email, 404 an unknown account, 409 an email that is
// another account's.
func (g *Gateway) adminIssueLogin(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ *reqInfo) error {
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
	l, err := g.store.IssueLogin(r.Context(), email, id, hash, now.Add(consoleSetupValidity), now)
	if errors.Is(err, store.ErrExists) {
		return apierr.Errf(http.StatusConflict, "invalid_request_error", "exists", "%s is already the console login of another account", apierr.Quote(email))
	}
	if err != nil {
		return storeErr(err, "account "+apierr.Quote(id))
	}
	return writeJSON(w, http.StatusCreated, LoginView{Email: l.Email, Account: l.Account,
		SetupLink: setupLink(g.consolePublicURL(), r, token), Expires: l.SetupExpires.UTC().Format(time.RFC3339)})
}

// consolePublicURL is console.public_url, the configured base of setup
// links; "" when none is configured.
func (g *Gateway) consolePublicURL() string { return g.cfg.Console.PublicURL }

// setupLink is the console's set-password link for token: under publicURL
// when it is set, else under the address r came to, https only when r came
// over TLS (X-Forwarded-Proto is a client's to set, so it is not believed).
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
