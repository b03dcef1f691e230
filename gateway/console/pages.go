package console

import (
	"net/http"
	"slices"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// overviewData is the account holder's first page.
type overviewData struct {
	Account store.Account
	Holds   int // the account's open holds: calls in progress
	Keys    []store.Key
	KeyID   string // the chart's key; "" for all
	Chart   chartView
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, s *store.Session) error {
	if s.Operator {
		http.Redirect(w, r, "/console/admin/accounts", http.StatusSeeOther)
		return nil
	}
	ctx := r.Context()
	c.be.Settled(ctx, s.Account)
	a, err := c.st.Balance(ctx, s.Account)
	if err != nil {
		return err
	}
	keys, err := c.st.ListKeys(ctx, s.Account)
	if err != nil {
		return err
	}
	holds, err := c.st.OpenHolds(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, h := range holds {
		if h.Account == s.Account {
			n++
		}
	}
	keyID := r.URL.Query().Get("key")
	if keyID != "" && !hasKey(keys, keyID) {
		return errorf(http.StatusNotFound, "key", "There is no such key on this account.")
	}
	sp := newSpend(c.now())
	err = c.st.Journal(ctx, s.Account, sp.from, sp.to(), func(e store.Entry) error {
		sp.add(e, keyID)
		return nil
	})
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Session: s, Nav: "overview",
		Data: overviewData{Account: a, Holds: n, Keys: keys, KeyID: keyID, Chart: sp.view()}})
	return nil
}

func hasKey(keys []store.Key, id string) bool {
	return slices.ContainsFunc(keys, func(k store.Key) bool { return k.ID == id })
}

// keysData is the keys page.
type keysData struct {
	Keys    []keyRow
	Routes  []string
	NewKey  string // the plaintext of the key just created, shown once
	NewID   string
	Error   *Error
	Form    map[string]string // the create form's values after a refusal
	Notice  string
	Revoked string
}

type keyRow struct {
	store.Key
	Spent, Remaining pricing.Nano
	Expired          bool
}

func (c *Console) keysData(r *http.Request, s *store.Session) (keysData, error) {
	c.be.Settled(r.Context(), s.Account)
	keys, err := c.st.ListKeys(r.Context(), s.Account)
	if err != nil {
		return keysData{}, err
	}
	now := c.now()
	d := keysData{Routes: append([]string{store.AutoRoute}, c.be.Routes()...)}
	for i := len(keys) - 1; i >= 0; i-- { // newest first
		k := keys[i]
		d.Keys = append(d.Keys, keyRow{Key: k, Spent: k.SpentAt(now), Remaining: k.RemainingAt(now), Expired: k.ExpiredAt(now)})
	}
	return d, nil
}

func (c *Console) keysPage(w http.ResponseWriter, r *http.Request, s *store.Session) error {
	d, err := c.keysData(r, s)
	if err != nil {
		return err
	}
	switch r.URL.Query().Get("done") {
	case "revoked":
		d.Notice = "The key was revoked: it no longer works."
	case "updated":
		d.Notice = "The key's limits were changed."
	}
	c.render(w, r, http.StatusOK, "keys", page{Title: "API keys", Session: s, Nav: "keys", Data: d})
	return nil
}

// createKey makes a key and shows it once, in this answer only.
func (c *Console) createKey(w http.ResponseWriter, r *http.Request, s *store.Session) error {
	f, err := parseKeyForm(r.PostForm)
	var k store.Key
	var plain string
	if err == nil {
		k, plain, err = c.be.CreateKey(r.Context(), s.Account, f.Route, f.Exclude, f.Settings)
	}
	d, derr := c.keysData(r, s)
	if derr != nil {
		return derr
	}
	if err != nil {
		e, ok := err.(*Error)
		if !ok {
			return err
		}
		d.Error = e
		d.Form = map[string]string{}
		for _, n := range []string{"label", "route", "limit", "reset", "expires", "allow", "exclude"} {
			d.Form[n] = r.PostFormValue(n)
		}
		c.render(w, r, e.Status, "keys", page{Title: "API keys", Session: s, Nav: "keys", Data: d})
		return nil
	}
	c.log.Info("console: key created", "account", s.Account, "key_id", k.ID)
	d.NewKey, d.NewID = plain, k.ID
	c.render(w, r, http.StatusCreated, "keys", page{Title: "API keys", Session: s, Nav: "keys", Data: d})
	return nil
}

func (c *Console) updateKey(w http.ResponseWriter, r *http.Request, s *store.Session) error {
	ks, err := parseLimitFields(r.PostForm)
	if err != nil {
		return err
	}
	if ks.Limit == nil && ks.Reset == nil {
		return errorf(http.StatusBadRequest, "limit", "Nothing to change: give a limit or a reset period.")
	}
	if _, err := c.be.UpdateKey(r.Context(), s.Account, r.PathValue("id"), ks); err != nil {
		return err
	}
	http.Redirect(w, r, "/console/keys?done=updated", http.StatusSeeOther)
	return nil
}

func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request, s *store.Session) error {
	k, err := c.be.RevokeKey(r.Context(), s.Account, r.PathValue("id"))
	if err != nil {
		return err
	}
	c.log.Info("console: key revoked", "account", s.Account, "key_id", k.ID)
	http.Redirect(w, r, "/console/keys?done=revoked", http.StatusSeeOther)
	return nil
}

// pricesData is the price table of the account's routes.
type pricesData struct {
	Rows []priceRow
}

type priceRow struct {
	Model, Route, Unit string
	Prices             []string
}

func (c *Console) pricesPage(w http.ResponseWriter, r *http.Request, s *store.Session) error {
	keys, err := c.st.ListKeys(r.Context(), s.Account)
	if err != nil {
		return err
	}
	var routes []string
	for _, k := range keys {
		if !k.Revoked && !slices.Contains(routes, k.Route) {
			routes = append(routes, k.Route)
		}
	}
	if len(routes) == 0 { // no key yet: every route a new key could use
		routes = append([]string{store.AutoRoute}, c.be.Routes()...)
	}
	var d pricesData
	for _, m := range c.be.Models(routes) {
		for _, rt := range sortedRoutes(m) {
			if !slices.Contains(routes, rt) && !(slices.Contains(routes, store.AutoRoute) && rt == m.EffectiveAutoRoute()) {
				continue
			}
			p := m.Routes[rt]
			d.Rows = append(d.Rows, priceRow{Model: m.ID, Route: rt, Unit: unitName(p.Unit), Prices: describePrice(p)})
		}
	}
	c.render(w, r, http.StatusOK, "prices", page{Title: "Prices", Session: s, Nav: "prices", Data: d})
	return nil
}
