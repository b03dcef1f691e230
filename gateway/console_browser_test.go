package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/modelrelay/modelrelay/internal/browsertest"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// The account holder the console test signs in as.
const (
	consoleAccount  = "acme"
	consoleEmail    = "alice@example.com"
	consolePassword = "correct horse battery staple"
)

// TestConsoleInBrowser drives the web console in headless Chromium as its
// two kinds of user would: the account holder sets a password from the
// operator's one-time link, signs in, creates a key and calls the API with
// it, finds the call and its exact cost in the recent calls and the chart,
// and revokes the key; the operator signs in with the admin token, credits
// the account, and the holder's overview shows the new balance. Every page
// visited is kept as a screenshot (build/artifacts/console-*.png), and any
// script error or Content-Security-Policy violation fails the test.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account(consoleAccount, "10")
	link := issueConsoleLogin(t, e, consoleAccount, consoleEmail)
	browser := browsertest.Start(t, 50*time.Second)

	holder := newConsoleTab(t, browser, e)
	holder.SetPassword(link, consolePassword)
	holder.signIn(consoleEmail, consolePassword)
	k, plain := holder.createKey(browsertest.KeyForm{
		Label: "e2e laptop", Route: "economy", Limit: "2.5", Reset: store.ResetMonthly,
		Expires: time.Now().UTC().AddDate(0, 0, 30).Format(time.DateOnly), Allow: "127.0.0.0/8",
	})

	const model = "modelf-flash"
	status, hdr, body := e.do("POST", "/v1/chat/completions", plain, chatBody(model, "hello from the console test"))
	if status != http.StatusOK {
		t.Fatalf("a call with the console's key = %d %s", status, body)
	}
	charge := journalEntry(t, e, consoleAccount, hdr.Get("X-Request-Id"))
	if charge.Kind != store.KindCharge || charge.KeyID != k.ID || charge.Model != model {
		t.Fatalf("the call's journal entry is %+v", charge)
	}
	holder.checkCall(charge)
	holder.checkChart(charge)
	holder.Open("/console/prices", "table#prices tr", "prices")

	holder.checkKeyRow(k, -charge.Amount)
	holder.revokeKey(k)
	if status, _, body := e.do("POST", "/v1/chat/completions", plain, chatBody(model, "after revoking")); status != http.StatusUnauthorized {
		t.Fatalf("a call with the revoked key = %d %s, want 401", status, body)
	}

	operator := newConsoleTab(t, browser, e)
	operator.operatorSignIn(testAdminToken)
	operator.Open("/console/admin/accounts", fmt.Sprintf("table#accounts tr[data-account=%q]", consoleAccount), "admin-accounts")
	operator.checkAccounts()
	operator.credit(consoleAccount, "5", "e2e top-up")
	operator.issueLogin(consoleAccount, "bob@example.com")
	operator.Open("/console/admin/lines", "table#lines tr", "")
	operator.Run("find the plugins", chromedp.WaitVisible("table#plugins tr", chromedp.ByQuery))
	operator.Screenshot("admin-lines")

	holder.Open("/console/", "#balance", "")
	holder.CheckAmount("#balance", e.balance(consoleAccount).Balance)
	holder.CheckProblems()
	operator.CheckProblems()
}

// issueConsoleLogin asks the admin API for a login on account and returns
// its one-time setup link.
func issueConsoleLogin(t *testing.T, e *env, account, email string) string {
	t.Helper()
	status, _, body := e.do("POST", "/admin/accounts/"+account+"/login", testAdminToken, map[string]string{"email": email})
	if status != http.StatusCreated {
		t.Fatalf("issue a login = %d %s", status, body)
	}
	var out struct {
		SetupLink string `json:"setup_link"`
	}
	if err := json.Unmarshal(body, &out); err != nil || !strings.HasPrefix(out.SetupLink, e.url+"/console/setup/") {
		t.Fatalf("the login's setup link is %q (%v), want one under %s/console/setup/", out.SetupLink, err, e.url)
	}
	return out.SetupLink
}

// journalEntry is the account's journal entry for the call requestID, once
// the call has settled.
func journalEntry(t *testing.T, e *env, account, requestID string) store.Entry {
	t.Helper()
	if requestID == "" {
		t.Fatal("the call's answer has no X-Request-Id")
	}
	es, err := e.charges(account, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range es {
		if en.RequestID == requestID {
			return en
		}
	}
	t.Fatalf("no journal entry for %s in %+v", requestID, es)
	return store.Entry{}
}

// consoleTab is one user of the console (browsertest.Tab) and the env
// whose store and balances the test checks the pages against.
type consoleTab struct {
	*browsertest.Tab
	t *testing.T
	e *env
}

func newConsoleTab(t *testing.T, browser context.Context, e *env) *consoleTab {
	t.Helper()
	return &consoleTab{Tab: browsertest.NewTab(t, browser, e.url, "console-"), t: t, e: e}
}

// signIn signs in as the account holder and checks the overview's
// balance.
func (c *consoleTab) signIn(email, password string) {
	c.t.Helper()
	c.SignIn(email, password)
	c.CheckAmount("#balance", c.e.balance(consoleAccount).Balance)
}

// operatorSignIn signs in with the admin token.
func (c *consoleTab) operatorSignIn(token string) {
	c.t.Helper()
	c.Open("/console/signin", "#admin-token", "")
	c.Run("fill in the operator's token", chromedp.SetValue("#admin-token", token, chromedp.ByID))
	c.Submit("sign in as the operator", "button#operator-signin")
	if !c.Has("button#signout") {
		c.t.Fatalf("the operator is not signed in: %q", c.Text("body"))
	}
}

// checkCall finds the call in the recent calls with the journal's exact
// cost, and in the CSV download.
func (c *consoleTab) checkCall(charge store.Entry) {
	c.t.Helper()
	row := c.CallRow(charge.RequestID)
	cost, err := browsertest.ParseShownUSD(row.Cost)
	if err != nil || cost != -charge.Amount || row.Model != charge.Model {
		c.t.Errorf("the call's row is %+v, want model %s and cost %s exactly (%v)", row, charge.Model, -charge.Amount, err)
	}
	c.Run("choose the call's key and model",
		chromedp.SetValue("#filter-key", charge.KeyID, chromedp.ByID),
		chromedp.SetValue("#filter-model", charge.Model, chromedp.ByID))
	c.Submit("filter the calls", "button#filter")
	if !c.Has(fmt.Sprintf("table#calls tr[data-request-id=%q]", charge.RequestID)) {
		c.t.Errorf("filtered by its key and model, the call is not listed: %q", c.Text("body"))
	}
	var href string
	c.Run("read the CSV link", chromedp.AttributeValue("a#calls-csv", "href", &href, nil, chromedp.ByQuery))
	csv := c.get(href)
	if !strings.Contains(csv, charge.RequestID) || !strings.Contains(csv, (-charge.Amount).String()) {
		c.t.Errorf("the CSV has no row for %s costing %s:\n%s", charge.RequestID, -charge.Amount, csv)
	}
}

// get fetches path (relative to the gateway) from Go with the tab's
// cookies — the page itself may not fetch (its CSP allows no connections).
func (c *consoleTab) get(path string) string {
	c.t.Helper()
	u, err := url.Parse(c.e.url)
	if err != nil {
		c.t.Fatal(err)
	}
	u, _ = u.Parse(path)
	var cookies []*network.Cookie
	c.Run("read the cookies", chromedp.ActionFunc(func(ctx context.Context) error {
		cookies, err = network.GetCookies().WithURLs([]string{u.String()}).Do(ctx)
		return err
	}))
	req, _ := http.NewRequest("GET", u.String(), nil)
	for _, ck := range cookies {
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET %s with the tab's cookies = %d %s", path, resp.StatusCode, body)
	}
	return string(body)
}

// chartBar is a bar of the overview's spend chart.
type chartBar struct {
	Model string `json:"model"`
	Day   string `json:"day"`
	USD   string `json:"usd"`
}

// checkChart checks that the overview's chart, of all keys and of the
// call's key, has the call's cost, exactly, as today's bar of its model, and
// nothing else (the account's only call).
func (c *consoleTab) checkChart(charge store.Entry) {
	c.t.Helper()
	day := charge.Time.UTC().Format(time.DateOnly)
	for i, path := range []string{"/console/", "/console/?key=" + url.QueryEscape(charge.KeyID)} {
		shot := ""
		if i == 0 {
			shot = "overview"
		}
		c.Open(path, "svg#spend-chart", shot)
		var bars []chartBar
		c.Run("read the chart", chromedp.Evaluate(`Array.from(document.querySelectorAll("svg#spend-chart rect[data-model]")).map(function (r) {
		  return {model: r.getAttribute("data-model"), day: r.getAttribute("data-day"), usd: r.getAttribute("data-usd")};
		})`, &bars))
		var total, model pricing.Nano
		for _, b := range bars {
			n, err := pricing.ParseUSD(b.USD)
			if err != nil {
				c.t.Fatalf("%s: bar %+v: %v", path, b, err)
			}
			total += n
			if b.Model == charge.Model && b.Day == day {
				model += n
			}
		}
		if model != -charge.Amount || total != -charge.Amount {
			c.t.Errorf("%s: the chart's bars %+v: %s for %s on %s and %s in all, want %s for both", path, bars, model, charge.Model, day, total, -charge.Amount)
		}
	}
}

// createKey creates a key with the form, reads it from the page, checks it
// is never shown again and that the store has it as the form said, and
// returns the stored key and its text.
func (c *consoleTab) createKey(f browsertest.KeyForm) (store.Key, string) {
	c.t.Helper()
	plain := c.CreateKey(f)
	c.checkCopy(plain)
	k := c.storedKey(f, plain)
	c.Open("/console/keys", fmt.Sprintf("table#keys tr[data-key-id=%q]", k.ID), "")
	var html string
	c.Run("read the keys page again", chromedp.OuterHTML("html", &html, chromedp.ByQuery))
	if c.Has("code#new-key") || strings.Contains(html, plain) {
		c.t.Fatal("the key is shown again on the keys page")
	}
	return k, plain
}

// checkCopy clicks the copy button (shown by the console's script, so this
// also proves the script ran under the page's CSP) and reads the clipboard.
func (c *consoleTab) checkCopy(plain string) {
	c.t.Helper()
	origin := c.e.url
	c.Run("let the page use the clipboard", chromedp.ActionFunc(func(ctx context.Context) error {
		cc := chromedp.FromContext(ctx)
		exec := cdp.WithExecutor(ctx, cc.Browser)
		info, err := target.GetTargetInfo().WithTargetID(cc.Target.TargetID).Do(exec)
		if err != nil {
			return err
		}
		for _, name := range []string{"clipboard-read", "clipboard-write"} {
			err := cdpbrowser.SetPermission(&cdpbrowser.PermissionDescriptor{Name: name}, cdpbrowser.PermissionSettingGranted).
				WithOrigin(origin).WithBrowserContextID(info.BrowserContextID).Do(exec)
			if err != nil {
				return err
			}
		}
		return nil
	}))
	var copied string
	c.Run("copy the key",
		chromedp.WaitVisible("button#copy-key", chromedp.ByQuery),
		chromedp.Click("button#copy-key", chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("copy-status").textContent !== ""`, nil),
		chromedp.Evaluate(`navigator.clipboard.readText()`, &copied, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if status := c.Text("#copy-status"); copied != plain || status != "Copied." {
		c.t.Errorf("the copy button put %d characters on the clipboard and says %q; want the key's %d", len(copied), status, len(plain))
	}
}

// storedKey is the account's one key, checked against the form and the
// text the page showed.
func (c *consoleTab) storedKey(f browsertest.KeyForm, plain string) store.Key {
	c.t.Helper()
	keys, err := c.e.store.ListKeys(context.Background(), consoleAccount)
	if err != nil || len(keys) != 1 {
		c.t.Fatalf("the account has keys %+v (%v), want the one created", keys, err)
	}
	k := keys[0]
	limit, _ := pricing.ParseUSD(f.Limit)
	day, _ := time.Parse(time.DateOnly, f.Expires)
	if k.Hash != store.HashKey(plain) || k.Label != f.Label || k.Route != f.Route || k.Limit != limit || k.Reset != f.Reset ||
		!slices.Equal(k.Allow, []string{f.Allow}) || k.Expires.Before(day) || k.Expires.After(day.Add(24*time.Hour)) {
		c.t.Fatalf("the store has the key as %+v, the form said %+v", k, f)
	}
	return k
}

// checkKeyRow checks the key's row in the list: its spend this period,
// exactly, and its limit.
func (c *consoleTab) checkKeyRow(k store.Key, spent pricing.Nano) {
	c.t.Helper()
	row := fmt.Sprintf("table#keys tr[data-key-id=%q]", k.ID)
	c.Open("/console/keys", row, "")
	c.CheckAmount(row+" td.spent", spent)
	limit := strings.Fields(c.Text(row + " td.limit"))
	if len(limit) < 2 || limit[1] != k.Reset {
		c.t.Fatalf("the key's limit reads %q, want %s %s", limit, k.Limit, k.Reset)
	}
	if n, err := browsertest.ParseShownUSD(limit[0]); err != nil || n != k.Limit {
		c.t.Errorf("the key's limit reads %q, want %s %s (%v)", limit, k.Limit, k.Reset, err)
	}
}

// revokeKey revokes the key from its row and checks the row and the store
// say so.
func (c *consoleTab) revokeKey(k store.Key) {
	c.t.Helper()
	c.RevokeKey(k.ID)
	if got, err := c.e.store.KeyByHash(context.Background(), k.Hash); err != nil || !got.Revoked {
		c.t.Fatalf("the store has the key as %+v (%v) after revoking it", got, err)
	}
}

// issueLogin issues a login from the account's page and checks that the
// link it shows is the one the store keeps (hashed), and shown only once.
func (c *consoleTab) issueLogin(account, email string) {
	c.t.Helper()
	c.Open("/console/admin/accounts/"+account, "#login-email", "")
	c.Run("type the email", chromedp.SetValue("#login-email", email, chromedp.ByID))
	c.Submit("issue the login", "button#issue-login")
	link := strings.TrimSpace(c.Text("#setup-link"))
	token, ok := strings.CutPrefix(link, c.e.url+"/console/setup/")
	if !ok || token == "" {
		c.t.Fatalf("the setup link reads %q", link)
	}
	l, err := c.e.store.Login(context.Background(), email)
	if err != nil || l.Account != account || l.SetupHash != store.HashKey(token) {
		c.t.Fatalf("the store has the login as %+v (%v), want one on %s with the link's token", l, err, account)
	}
	c.Open("/console/admin/accounts/"+account, "#login-email", "")
	if c.Has("#setup-link") {
		c.t.Error("the setup link is shown again")
	}
}

// checkAccounts creates an account with the operator's form and searches
// the list by id prefix.
func (c *consoleTab) checkAccounts() {
	c.t.Helper()
	c.Run("name a new account", chromedp.SetValue("#new-account", "beta-e2e", chromedp.ByID))
	c.Submit("create the account", "button#create-account")
	if _, err := c.e.store.Balance(context.Background(), "beta-e2e"); err != nil {
		c.t.Fatalf("the account created in the console: %v", err)
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{{"", []string{consoleAccount, "beta-e2e"}}, {"bet", []string{"beta-e2e"}}, {"zz", nil}} {
		c.Open("/console/admin/accounts", "#account-search", "")
		// Not chromedp.SetValue: it refuses to set "".
		c.Run("search", chromedp.Evaluate(fmt.Sprintf(`document.getElementById("account-search").value = %q`, tc.prefix), nil),
			chromedp.Evaluate(`window.relayOldPage = true`, nil),
			chromedp.Submit("#account-search", chromedp.ByID), chromedp.ActionFunc(browsertest.WaitNewPage))
		var got []string
		c.Run("read the accounts", chromedp.Evaluate(`Array.from(document.querySelectorAll("table#accounts tr[data-account]")).map(function (tr) { return tr.getAttribute("data-account"); })`, &got))
		if !slices.Equal(got, tc.want) {
			c.t.Errorf("accounts starting with %q: the page lists %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

// credit credits the account from its operator page and checks the page
// shows the new balance and the journal keeps the note.
func (c *consoleTab) credit(account, usd, note string) {
	c.t.Helper()
	before := c.e.balance(account).Balance
	c.Open("/console/admin/accounts/"+account, "button#credit", "")
	c.Run("fill in the credit",
		chromedp.SetValue("#credit-amount", usd, chromedp.ByID),
		chromedp.SetValue("#credit-note", note, chromedp.ByID))
	c.Submit("credit the account", "button#credit")
	amt, _ := pricing.ParseUSD(usd)
	c.Open("/console/admin/accounts/"+account, "#balance", "admin-account")
	c.CheckAmount("#balance", before+amt)
	es, err := c.e.charges(account, 1)
	if err != nil || len(es) != 1 || es[0].Kind != store.KindCredit || es[0].Amount != amt || es[0].Note != note {
		c.t.Errorf("the journal's last entry is %+v (%v), want a credit of %s noted %q", es, err, amt, note)
	}
}
