package admin

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/wire"
)

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

func (a *API) handleCreateKey(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
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
	k, plain, err := a.createKey(r.Context(), req.Account, req.Route, req.Exclude, req.keySettings)
	if err != nil {
		return err
	}
	v := keyView(k, k.Created)
	v.Key = plain
	return wire.WriteJSON(w, http.StatusCreated, v)
}

// createKey makes a key on account with the admin API's rules (a
// configured route or auto, excluded models sold here, settings checked by
// keySettings.update) and returns it with its plaintext; the admin API and
// the console share it.
func (a *API) createKey(ctx context.Context, account, route string, exclude []string, s keySettings) (store.Key, string, error) {
	if route == "" {
		return store.Key{}, "", apierr.BadRequest("route", "route is required (a route name, or \"auto\")")
	}
	if route != store.AutoRoute && !a.routeExists(route) {
		return store.Key{}, "", apierr.BadRequest("route", "route %s is not configured; routes: %s, auto", apierr.Quote(route), strings.Join(a.routeNames(), ", "))
	}
	cat := a.d.Plugins.Catalog()
	for _, m := range exclude {
		if _, ok := cat.Model(m); !ok {
			return store.Key{}, "", apierr.BadRequest("exclude", "exclude: %s is not a model sold here", apierr.Quote(m))
		}
	}
	now := a.d.Now()
	u, err := s.update(now)
	if err != nil {
		return store.Key{}, "", err
	}
	if _, err := a.d.Store.Balance(ctx, account); err != nil {
		return store.Key{}, "", storeErr(err, "account "+apierr.Quote(account))
	}
	plain, id, hash, err := store.NewKey()
	if err != nil {
		return store.Key{}, "", err
	}
	k := store.Key{ID: id, Hash: hash, Account: account, Route: route, Exclude: exclude, Created: now}
	applyUpdate(&k, u)
	if err := a.d.Store.CreateKey(ctx, k); err != nil {
		return store.Key{}, "", storeErr(err, "key")
	}
	a.d.Publish(ctx, k.ID)
	return k, plain, nil
}

func (a *API) listKeys(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	account := r.URL.Query().Get("account")
	if account != "" {
		a.d.Settled(r.Context(), account) // the spend of the calls it answered
	}
	ks, err := a.d.Store.ListKeys(r.Context(), account)
	if err != nil {
		return err
	}
	now := a.d.Now()
	out := make([]KeyView, len(ks))
	for i, k := range ks {
		out[i] = keyView(k, now)
	}
	return wire.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

// key shows one key by its id, once the calls its account was answered
// have settled (as the account's balance is shown).
func (a *API) key(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id := ps.ByName("id")
	k, err := a.keyByID(r, "", id)
	if err != nil {
		return err
	}
	a.d.Settled(r.Context(), k.Account)
	if k, err = a.keyByID(r, k.Account, id); err != nil {
		return err
	}
	return wire.WriteJSON(w, http.StatusOK, keyView(k, a.d.Now()))
}

// keyByID finds a key by its id among account's keys ("": every key). The
// store looks keys up by hash, so this lists them: an admin read, never on
// a call's path.
func (a *API) keyByID(r *http.Request, account, id string) (store.Key, error) {
	if store.CheckID("key", id) != nil {
		return store.Key{}, apierr.BadRequest("id", "id must be a key id, key_…")
	}
	ks, err := a.d.Store.ListKeys(r.Context(), account)
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

func (a *API) handleRevokeKey(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var req keyRef
	if err := readJSON(r, &req); err != nil {
		return err
	}
	id, err := a.keyRefID(r, req)
	if err != nil {
		return err
	}
	k, err := a.revokeKey(r.Context(), id)
	if err != nil {
		return err
	}
	return wire.WriteJSON(w, http.StatusOK, keyView(k, a.d.Now()))
}

// revokeKey revokes key id and makes every replica drop its cached
// record at once, so the key stops working now.
func (a *API) revokeKey(ctx context.Context, id string) (store.Key, error) {
	k, err := a.d.Store.RevokeKey(ctx, id)
	if err != nil {
		return store.Key{}, storeErr(err, "key "+apierr.Quote(id))
	}
	a.d.Evict(k.ID)
	a.d.Publish(ctx, k.ID)
	return k, nil
}

// keyRef names a key in an admin request body: its id, or the key itself.
type keyRef struct {
	ID  string `json:"id"`
	Key string `json:"key"`
}

func (a *API) keyRefID(r *http.Request, ref keyRef) (string, error) {
	if ref.Key != "" {
		k, err := a.d.Store.KeyByHash(r.Context(), store.HashKey(ref.Key))
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

// handleUpdateKey changes a key's settings (the fields given; see
// keySettings) and keeps its spend. Every replica drops its cached record
// at once, as for a revocation.
func (a *API) handleUpdateKey(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var req struct {
		ID  string `json:"id"`
		Key string `json:"key"`
		keySettings
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	id, err := a.keyRefID(r, keyRef{ID: req.ID, Key: req.Key})
	if err != nil {
		return err
	}
	k, err := a.updateKey(r.Context(), id, req.keySettings)
	if err != nil {
		return err
	}
	return wire.WriteJSON(w, http.StatusOK, keyView(k, a.d.Now()))
}

// updateKey changes key id's settings (keySettings.update's rules) and
// makes every replica drop its cached record.
func (a *API) updateKey(ctx context.Context, id string, s keySettings) (store.Key, error) {
	u, err := s.update(a.d.Now())
	if err != nil {
		return store.Key{}, err
	}
	if u == (store.KeyUpdate{}) {
		return store.Key{}, apierr.BadRequest("body", "nothing to change: give label, limit_usd, limit_reset, expires or allow")
	}
	k, err := a.d.Store.UpdateKey(ctx, id, u)
	if err != nil {
		return store.Key{}, storeErr(err, "key "+apierr.Quote(id))
	}
	a.d.Evict(k.ID)
	a.d.Publish(ctx, k.ID)
	return k, nil
}
