package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// setupValidity is how long a set-password link works.
const setupValidity = 24 * time.Hour

// maxAccountsShown bounds the accounts page.
const maxAccountsShown = 200

// accountsData is the operator's accounts page.
type accountsData struct {
	Accounts []store.Account
	Query    string
	More     bool
	Error    *Error
	NewID    string
}

func (c *Console) accountsPage(w http.ResponseWriter, r *http.Request, s *store.Session) error {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	d, err := c.accountsData(r, q)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "accounts", page{Title: "Accounts", Session: s, Nav: "accounts", Data: d})
	return nil
}

func (c *Console) accountsData(r *http.Request, prefix string) (accountsData, error) {
	d := accountsData{Query: prefix}
	if len(prefix) > 64 || strings.ContainsFunc(prefix, func(r rune) bool { return r < 0x21 || r >= 0x7f }) {
		return d, errorf(http.StatusBadRequest, "q", "search: an account id is at most 64 printable ASCII characters")
	}
	as, err := c.st.ListAccounts(r.Context(), searchAfter(prefix), maxAccountsShown+1)
	if err != nil {
		return d, err
	}
	for _, a := range as {
		if !strings.HasPrefix(a.ID, prefix) {
			break
		}
		if len(d.Accounts) == maxAccountsShown {
			d.More = true
			break
		}
		d.Accounts = append(d.Accounts, a)
	}
	return d, nil
}

// searchAfter is the id every account id starting with prefix sorts
// after: prefix with its last byte lowered, then the highest id bytes.
// Account ids are ASCII below 0x7f; a prefix no id can start with finds
// nothing, as the listing is cut at the first id without the prefix.
func searchAfter(prefix string) string {
	if prefix == "" {
		return ""
	}
	n := len(prefix)
	return prefix[:n-1] + string(prefix[n-1]-1) + strings.Repeat("\x7f", 64)
}

func (c *Console) createAccount(w http.ResponseWriter, r *http.Request, s *store.Session) error {
	id := strings.TrimSpace(r.PostFormValue("id"))
	_, err := c.be.CreateAccount(r.Context(), id)
	if errors.Is(err, store.ErrExists) {
		err = errorf(http.StatusConflict, "id", "account "+quote(id)+" exists already")
	}
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return err
		}
		d, derr := c.accountsData(r, "")
		if derr != nil {
			return derr
		}
		d.Error, d.NewID = e, id
		c.render(w, r, e.Status, "accounts", page{Title: "Accounts", Session: s, Nav: "accounts", Data: d})
		return nil
	}
	c.log.Info("console: account created", "account", id)
	http.Redirect(w, r, "/console/admin/accounts/"+url.PathEscape(id), http.StatusSeeOther)
	return nil
}

// accountData is one account as the operator sees it.
type accountData struct {
	Account   store.Account
	Keys      []keyRow
	Calls     []call
	Logins    []store.Login
	SetupLink string
	SetupFor  string
	Expires   time.Time
	Error     *Error
	Notice    string
}

func (c *Console) accountData(r *http.Request, id string) (accountData, error) {
	var d accountData
	ctx := r.Context()
	c.be.Settled(ctx, id)
	a, err := c.st.Balance(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return d, errorf(http.StatusNotFound, "", "There is no such account.")
	}
	if err != nil {
		return d, err
	}
	d.Account = a
	keys, err := c.st.ListKeys(ctx, id)
	if err != nil {
		return d, err
	}
	now := c.now()
	for i := len(keys) - 1; i >= 0; i-- {
		k := keys[i]
		d.Keys = append(d.Keys, keyRow{Key: k, Spent: k.SpentAt(now), Remaining: k.RemainingAt(now), Expired: k.ExpiredAt(now)})
	}
	if d.Calls, _, err = c.calls(r, id, callFilter{}); err != nil {
		return d, err
	}
	if len(d.Calls) > 50 {
		d.Calls = d.Calls[:50]
	}
	if d.Logins, err = c.st.ListLogins(ctx, id); err != nil {
		return d, err
	}
	return d, nil
}

func (c *Console) accountPage(w http.ResponseWriter, r *http.Request, s *store.Session) error {
	d, err := c.accountData(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	if r.URL.Query().Get("done") == "credited" {
		d.Notice = "Credit added."
	}
	c.render(w, r, http.StatusOK, "account", page{Title: "Account " + d.Account.ID, Session: s, Nav: "accounts", Data: d})
	return nil
}

// parseCredit reads the credit form: amount (USD > 0) and note.
func parseCredit(f url.Values) (pricing.Nano, string, error) {
	text := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(f.Get("amount")), "$"))
	if len(text) > 64 {
		return 0, "", errorf(http.StatusBadRequest, "amount", "amount: not an amount in USD such as 25 or 0.50")
	}
	amt, err := pricing.ParseUSD(text)
	if err != nil {
		return 0, "", errorf(http.StatusBadRequest, "amount", "amount: "+quote(text)+" is not an amount in USD such as 25 or 0.50")
	}
	if amt <= 0 {
		return 0, "", errorf(http.StatusBadRequest, "amount", "amount: must be more than zero")
	}
	note := f.Get("note")
	if len(note) > store.MaxNoteLen {
		return 0, "", errorf(http.StatusBadRequest, "note", "note: at most "+itoa(store.MaxNoteLen)+" bytes")
	}
	return amt, note, nil
}

func (c *Console) credit(w http.ResponseWriter, r *http.Request, s *store.Session) error {
	id := r.PathValue("id")
	amt, note, err := parseCredit(r.PostForm)
	if err == nil {
		_, err = c.be.Credit(r.Context(), id, amt, note)
	}
	if err != nil {
		return c.accountError(w, r, s, id, err)
	}
	c.log.Info("console: account credited", "account", id, "usd", amt.String())
	http.Redirect(w, r, "/console/admin/accounts/"+url.PathEscape(id)+"?done=credited", http.StatusSeeOther)
	return nil
}

// accountError shows the account page with a form's refusal.
func (c *Console) accountError(w http.ResponseWriter, r *http.Request, s *store.Session, id string, err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	d, derr := c.accountData(r, id)
	if derr != nil {
		return derr
	}
	d.Error = e
	c.render(w, r, e.Status, "account", page{Title: "Account " + id, Session: s, Nav: "accounts", Data: d})
	return nil
}

// issueLogin creates or renews the login of an email on the account and
// shows its one-time set-password link, once.
func (c *Console) issueLogin(w http.ResponseWriter, r *http.Request, s *store.Session) error {
	id := r.PathValue("id")
	raw := r.PostFormValue("email")
	email, err := store.NormalizeEmail(raw)
	if err != nil {
		return c.accountError(w, r, s, id, errorf(http.StatusBadRequest, "email", "email: "+quote(raw)+" is not an address like name@example.com"))
	}
	token, hash, err := store.NewSetupToken()
	if err != nil {
		return err
	}
	now := c.now()
	l, err := c.st.IssueLogin(r.Context(), email, id, hash, now.Add(setupValidity), now)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusNotFound, "", "There is no such account.")
	case errors.Is(err, store.ErrExists):
		return c.accountError(w, r, s, id, errorf(http.StatusConflict, "email", "email: "+quote(email)+" is another account's login"))
	case err != nil:
		return err
	}
	d, err := c.accountData(r, id)
	if err != nil {
		return err
	}
	d.SetupLink, d.SetupFor, d.Expires = c.setupLink(r, token), l.Email, l.SetupExpires
	c.log.Info("console: login issued", "account", id)
	c.render(w, r, http.StatusCreated, "account", page{Title: "Account " + id, Session: s, Nav: "accounts", Data: d})
	return nil
}

// setupLink is the set-password link of token: console.public_url when
// set, else the scheme (TLS or not) and Host the request came to.
func (c *Console) setupLink(r *http.Request, token string) string {
	base := c.cfg.PublicURL
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	return base + "/console/setup/" + token
}

// linesData is the operator's lines page.
type linesData struct {
	Lines   []Line
	Plugins []pluginRow
}

type pluginRow struct {
	Plugin
	Prices []priceRow
}

func (c *Console) linesPage(w http.ResponseWriter, r *http.Request, s *store.Session) error {
	models := map[string]pricing.Model{}
	for _, m := range c.be.Models(nil) {
		models[m.ID] = m
	}
	d := linesData{Lines: c.be.Lines()}
	for _, p := range c.be.Plugins() {
		row := pluginRow{Plugin: p}
		for _, id := range p.Models {
			m := models[id]
			for _, rt := range sortedRoutes(m) {
				row.Prices = append(row.Prices, priceRow{Model: id, Route: rt, Unit: unitName(m.Routes[rt].Unit), Prices: describePrice(m.Routes[rt])})
			}
		}
		d.Plugins = append(d.Plugins, row)
	}
	c.render(w, r, http.StatusOK, "lines", page{Title: "Lines and plugins", Session: s, Nav: "lines", Data: d})
	return nil
}
