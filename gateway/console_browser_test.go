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
	e := newEnv(t)
	e.account(consoleAccount, "10")
	link := issueConsoleLogin(t, e, consoleAccount, consoleEmail)
	browser := startBrowser(t, 50*time.Second)

	holder := newConsoleTab(t, browser, e)
	holder.setPassword(link, consolePassword)
	holder.signIn(consoleEmail, consolePassword)
	k, plain := holder.createKey(consoleKeyForm{
		label: "e2e laptop", route: "economy", limit: "2.5", reset: store.ResetMonthly,
		expires: time.Now().UTC().AddDate(0, 0, 30).Format(time.DateOnly), allow: "127.0.0.0/8",
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
	holder.open("/console/prices", "table#prices tr", "prices")

	holder.checkKeyRow(k, -charge.Amount)
	holder.revokeKey(k)
	if status, _, body := e.do("POST", "/v1/chat/completions", plain, chatBody(model, "after revoking")); status != http.StatusUnauthorized {
		t.Fatalf("a call with the revoked key = %d %s, want 401", status, body)
	}

	operator := newConsoleTab(t, browser, e)
	operator.operatorSignIn(testAdminToken)
	operator.open("/console/admin/accounts", fmt.Sprintf("table#accounts tr[data-account=%q]", consoleAccount), "admin-accounts")
	operator.checkAccounts()
	operator.credit(consoleAccount, "5", "e2e top-up")
	operator.issueLogin(consoleAccount, "bob@example.com")
	operator.open("/console/admin/lines", "table#lines tr", "")
	operator.run("find the plugins", chromedp.WaitVisible("table#plugins tr", chromedp.ByQuery))
	saveScreenshot(t, operator.ctx, "console-admin-lines.png")

	holder.open("/console/", "#balance", "")
	holder.checkAmount("#balance", e.balance(consoleAccount).Balance)
	holder.problems.check(t)
	operator.problems.check(t)
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

// consoleTab is one user of the console: a tab in a browser context of its
// own, so its cookies are its alone.
type consoleTab struct {
	t        *testing.T
	e        *env
	ctx      context.Context
	problems *pageProblems
}

func newConsoleTab(t *testing.T, browser context.Context, e *env) *consoleTab {
	t.Helper()
	ctx := newPrivateTab(t, browser)
	return &consoleTab{t: t, e: e, ctx: ctx, problems: watchProblems(ctx)}
}

// consoleStep bounds one step, so that a page that never shows what the
// test waits for fails with that page's text rather than at the test's end.
const consoleStep = 15 * time.Second

// run runs actions in the tab; when they fail it reports the page's URL,
// its text and the problems the tab reported.
func (c *consoleTab) run(what string, actions ...chromedp.Action) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, consoleStep)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var loc, text string
		diag, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		defer cancel()
		_ = chromedp.Run(diag, chromedp.Location(&loc),
			chromedp.Evaluate(`document.body ? document.body.innerText.slice(0, 600) : ""`, &text))
		c.t.Fatalf("%s: %v\nat %s the page says:\n%s\nproblems: %q", what, err, loc, text, c.problems.all())
	}
}

// open loads path and waits for sel; with a name, it saves a screenshot
// as console-<name>.png.
func (c *consoleTab) open(path, sel, name string) {
	c.t.Helper()
	c.run("open "+path, chromedp.Navigate(c.e.url+path), chromedp.WaitVisible(sel, chromedp.ByQuery))
	if name != "" {
		saveScreenshot(c.t, c.ctx, "console-"+name+".png")
	}
}

// has reports whether the page has an element matching sel.
func (c *consoleTab) has(sel string) bool {
	c.t.Helper()
	var ok bool
	c.run("look for "+sel, chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%q) !== null`, sel), &ok))
	return ok
}

// text is the text of the element matching sel.
func (c *consoleTab) text(sel string) string {
	c.t.Helper()
	var s string
	c.run("read "+sel, chromedp.Text(sel, &s, chromedp.ByQuery))
	return s
}

// checkAmount checks that the element sel shows want: its text to the cent
// at least, and exactly in its title when the text is rounded.
func (c *consoleTab) checkAmount(sel string, want pricing.Nano) {
	c.t.Helper()
	var text, title string
	var ok bool
	c.run("read "+sel, chromedp.Text(sel, &text, chromedp.ByQuery),
		chromedp.AttributeValue(sel, "title", &title, &ok, chromedp.ByQuery))
	shown, err := parseShownUSD(text)
	exact := shown
	if ok && title != "" {
		exact, err = parseShownUSD(title)
	}
	const cent = pricing.NanoPerUSD / 100
	if err != nil || exact != want || shown-want >= cent || want-shown >= cent {
		c.t.Errorf("%s shows %q (title %q), want %s (exactly, in the title if the text is rounded) (%v)", sel, text, title, want, err)
	}
}

// parseShownUSD reads an amount as a page shows it ("$1,234.5", "−$0.01",
// "0.000123") into exact nano-USD.
func parseShownUSD(s string) (pricing.Nano, error) {
	s = strings.NewReplacer("$", "", ",", "", " ", "", "\u00a0", "", "\u2212", "-", "US", "").Replace(strings.TrimSpace(s))
	return pricing.ParseSignedUSD(s)
}

// submit clicks the button sel and waits until the page that answers the
// form has replaced the current one (a mark left in the old page is gone).
func (c *consoleTab) submit(what, sel string) {
	c.t.Helper()
	c.run(what,
		chromedp.Evaluate(`window.relayOldPage = true`, nil),
		chromedp.Click(sel, chromedp.ByQuery),
		chromedp.ActionFunc(waitNewPage))
}

// waitNewPage waits until the tab shows a fully loaded page without the
// mark submit left in the old one. It polls from Go: a poll inside the
// page would not survive the navigation.
func waitNewPage(ctx context.Context) error {
	for {
		var fresh bool
		err := chromedp.Evaluate(`window.relayOldPage !== true && document.readyState === "complete"`, &fresh).Do(ctx)
		if err == nil && fresh {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// setPassword opens the one-time setup link and sets the login's password.
func (c *consoleTab) setPassword(link, password string) {
	c.t.Helper()
	c.run("open the setup link", chromedp.Navigate(link), chromedp.WaitVisible("#password2", chromedp.ByID))
	saveScreenshot(c.t, c.ctx, "console-setup.png")
	c.run("fill in the new password",
		chromedp.SetValue("#password", password, chromedp.ByID),
		chromedp.SetValue("#password2", password, chromedp.ByID))
	c.submit("set the password", "button#set-password")
	if c.has("#password2") {
		c.t.Fatalf("the setup page is still shown after setting the password: %q", c.text("body"))
	}
}

// signIn signs in as the account holder, signing out first if setting the
// password already signed in, and lands on the overview.
func (c *consoleTab) signIn(email, password string) {
	c.t.Helper()
	c.run("open the sign-in page", chromedp.Navigate(c.e.url+"/console/signin"))
	if c.has("button#signout") {
		c.submit("sign out", "button#signout")
		c.run("open the sign-in page", chromedp.Navigate(c.e.url+"/console/signin"))
	}
	c.run("wait for the sign-in form", chromedp.WaitVisible("#email", chromedp.ByID))
	saveScreenshot(c.t, c.ctx, "console-signin.png")
	c.run("fill in the sign-in form",
		chromedp.SetValue("#email", email, chromedp.ByID),
		chromedp.SetValue("#password", password, chromedp.ByID))
	c.submit("sign in", "button#signin")
	c.open("/console/", "#balance", "")
	c.checkAmount("#balance", c.e.balance(consoleAccount).Balance)
}

// operatorSignIn signs in with the admin token.
func (c *consoleTab) operatorSignIn(token string) {
	c.t.Helper()
	c.open("/console/signin", "#admin-token", "")
	c.run("fill in the operator's token", chromedp.SetValue("#admin-token", token, chromedp.ByID))
	c.submit("sign in as the operator", "button#operator-signin")
	if !c.has("button#signout") {
		c.t.Fatalf("the operator is not signed in: %q", c.text("body"))
	}
}

// callRow is a row of the recent calls as the page shows it.
type callRow struct {
	ID    string `json:"id"`
	Model string `json:"model"`
	Cost  string `json:"cost"`
}

// checkCall finds the call in the recent calls with the journal's exact
// cost, and in the CSV download.
func (c *consoleTab) checkCall(charge store.Entry) {
	c.t.Helper()
	c.open("/console/calls", fmt.Sprintf("table#calls tr[data-request-id=%q]", charge.RequestID), "calls")
	var rows []callRow
	c.run("read the calls", chromedp.Evaluate(`Array.from(document.querySelectorAll("table#calls tr[data-request-id]")).map(function (tr) {
	  var m = tr.querySelector("td.model"), c = tr.querySelector("td.cost");
	  return {id: tr.getAttribute("data-request-id"), model: m ? m.textContent.trim() : "", cost: c ? c.textContent.trim() : ""};
	})`, &rows))
	i := slices.IndexFunc(rows, func(r callRow) bool { return r.ID == charge.RequestID })
	if i < 0 {
		c.t.Fatalf("the call %s is not among the rows %+v", charge.RequestID, rows)
	}
	cost, err := parseShownUSD(rows[i].Cost)
	if err != nil || cost != -charge.Amount || rows[i].Model != charge.Model {
		c.t.Errorf("the call's row is %+v, want model %s and cost %s exactly (%v)", rows[i], charge.Model, -charge.Amount, err)
	}
	c.run("choose the call's key and model",
		chromedp.SetValue("#filter-key", charge.KeyID, chromedp.ByID),
		chromedp.SetValue("#filter-model", charge.Model, chromedp.ByID))
	c.submit("filter the calls", "button#filter")
	if !c.has(fmt.Sprintf("table#calls tr[data-request-id=%q]", charge.RequestID)) {
		c.t.Errorf("filtered by its key and model, the call is not listed: %q", c.text("body"))
	}
	var href string
	c.run("read the CSV link", chromedp.AttributeValue("a#calls-csv", "href", &href, nil, chromedp.ByQuery))
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
	c.run("read the cookies", chromedp.ActionFunc(func(ctx context.Context) error {
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
		c.open(path, "svg#spend-chart", shot)
		var bars []chartBar
		c.run("read the chart", chromedp.Evaluate(`Array.from(document.querySelectorAll("svg#spend-chart rect[data-model]")).map(function (r) {
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

// consoleKeyForm is what the holder types into the new-key form.
type consoleKeyForm struct {
	label, route, limit, reset, expires, allow string
}

// createKey creates a key with the form, reads it from the page, checks it
// is never shown again and that the store has it as the form said, and
// returns the stored key and its text.
func (c *consoleTab) createKey(f consoleKeyForm) (store.Key, string) {
	c.t.Helper()
	c.open("/console/keys", "button#create-key", "")
	c.run("fill in the new key's form",
		chromedp.SetValue("#key-label", f.label, chromedp.ByID),
		chromedp.SetValue("#key-route", f.route, chromedp.ByID),
		chromedp.SetValue("#key-limit", f.limit, chromedp.ByID),
		chromedp.SetValue("#key-reset", f.reset, chromedp.ByID),
		chromedp.SetValue("#key-expires", f.expires, chromedp.ByID),
		chromedp.SetValue("#key-allow", f.allow, chromedp.ByID))
	c.submit("create the key", "button#create-key")
	plain := strings.TrimSpace(c.text("code#new-key"))
	if !strings.HasPrefix(plain, "sk-") {
		c.t.Fatalf("the new key reads %q", plain)
	}
	c.checkCopy(plain)
	k := c.storedKey(f, plain)
	c.open("/console/keys", fmt.Sprintf("table#keys tr[data-key-id=%q]", k.ID), "")
	var html string
	c.run("read the keys page again", chromedp.OuterHTML("html", &html, chromedp.ByQuery))
	if c.has("code#new-key") || strings.Contains(html, plain) {
		c.t.Fatal("the key is shown again on the keys page")
	}
	return k, plain
}

// checkCopy clicks the copy button (shown by the console's script, so this
// also proves the script ran under the page's CSP) and reads the clipboard.
func (c *consoleTab) checkCopy(plain string) {
	c.t.Helper()
	origin := c.e.url
	c.run("let the page use the clipboard", chromedp.ActionFunc(func(ctx context.Context) error {
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
	c.run("copy the key",
		chromedp.WaitVisible("button#copy-key", chromedp.ByQuery),
		chromedp.Click("button#copy-key", chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("copy-status").textContent !== ""`, nil),
		chromedp.Evaluate(`navigator.clipboard.readText()`, &copied, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if status := c.text("#copy-status"); copied != plain || status != "Copied." {
		c.t.Errorf("the copy button put %d characters on the clipboard and says %q; want the key's %d", len(copied), status, len(plain))
	}
}

// storedKey is the account's one key, checked against the form and the
// text the page showed.
func (c *consoleTab) storedKey(f consoleKeyForm, plain string) store.Key {
	c.t.Helper()
	keys, err := c.e.store.ListKeys(context.Background(), consoleAccount)
	if err != nil || len(keys) != 1 {
		c.t.Fatalf("the account has keys %+v (%v), want the one created", keys, err)
	}
	k := keys[0]
	limit, _ := pricing.ParseUSD(f.limit)
	day, _ := time.Parse(time.DateOnly, f.expires)
	if k.Hash != store.HashKey(plain) || k.Label != f.label || k.Route != f.route || k.Limit != limit || k.Reset != f.reset ||
		!slices.Equal(k.Allow, []string{f.allow}) || k.Expires.Before(day) || k.Expires.After(day.Add(24*time.Hour)) {
		c.t.Fatalf("the store has the key as %+v, the form said %+v", k, f)
	}
	return k
}

// checkKeyRow checks the key's row in the list: its spend this period,
// exactly, and its limit.
func (c *consoleTab) checkKeyRow(k store.Key, spent pricing.Nano) {
	c.t.Helper()
	row := fmt.Sprintf("table#keys tr[data-key-id=%q]", k.ID)
	c.open("/console/keys", row, "")
	c.checkAmount(row+" td.spent", spent)
	limit := strings.Fields(c.text(row + " td.limit"))
	if len(limit) < 2 || limit[1] != k.Reset {
		c.t.Fatalf("the key's limit reads %q, want %s %s", limit, k.Limit, k.Reset)
	}
	if n, err := parseShownUSD(limit[0]); err != nil || n != k.Limit {
		c.t.Errorf("the key's limit reads %q, want %s %s (%v)", limit, k.Limit, k.Reset, err)
	}
}

// revokeKey revokes the key from its row and checks the row and the store
// say so.
func (c *consoleTab) revokeKey(k store.Key) {
	c.t.Helper()
	row := fmt.Sprintf("table#keys tr[data-key-id=%q]", k.ID)
	c.open("/console/keys", row+" button.revoke", "")
	c.submit("revoke the key", row+" button.revoke")
	c.run("wait for the key to read revoked", chromedp.WaitVisible(row+" .status", chromedp.ByQuery))
	if s := c.text(row + " .status"); !strings.Contains(strings.ToLower(s), "revoked") {
		c.t.Errorf("the revoked key's status reads %q", s)
	}
	saveScreenshot(c.t, c.ctx, "console-keys.png")
	if got, err := c.e.store.KeyByHash(context.Background(), k.Hash); err != nil || !got.Revoked {
		c.t.Fatalf("the store has the key as %+v (%v) after revoking it", got, err)
	}
}

// issueLogin issues a login from the account's page and checks that the
// link it shows is the one the store keeps (hashed), and shown only once.
func (c *consoleTab) issueLogin(account, email string) {
	c.t.Helper()
	c.open("/console/admin/accounts/"+account, "#login-email", "")
	c.run("type the email", chromedp.SetValue("#login-email", email, chromedp.ByID))
	c.submit("issue the login", "button#issue-login")
	link := strings.TrimSpace(c.text("#setup-link"))
	token, ok := strings.CutPrefix(link, c.e.url+"/console/setup/")
	if !ok || token == "" {
		c.t.Fatalf("the setup link reads %q", link)
	}
	l, err := c.e.store.Login(context.Background(), email)
	if err != nil || l.Account != account || l.SetupHash != store.HashKey(token) {
		c.t.Fatalf("the store has the login as %+v (%v), want one on %s with the link's token", l, err, account)
	}
	c.open("/console/admin/accounts/"+account, "#login-email", "")
	if c.has("#setup-link") {
		c.t.Error("the setup link is shown again")
	}
}

// checkAccounts creates an account with the operator's form and searches
// the list by id prefix.
func (c *consoleTab) checkAccounts() {
	c.t.Helper()
	c.run("name a new account", chromedp.SetValue("#new-account", "beta-e2e", chromedp.ByID))
	c.submit("create the account", "button#create-account")
	if _, err := c.e.store.Balance(context.Background(), "beta-e2e"); err != nil {
		c.t.Fatalf("the account created in the console: %v", err)
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{{"", []string{consoleAccount, "beta-e2e"}}, {"bet", []string{"beta-e2e"}}, {"zz", nil}} {
		c.open("/console/admin/accounts", "#account-search", "")
		// Not chromedp.SetValue: it refuses to set "".
		c.run("search", chromedp.Evaluate(fmt.Sprintf(`document.getElementById("account-search").value = %q`, tc.prefix), nil),
			chromedp.Evaluate(`window.relayOldPage = true`, nil),
			chromedp.Submit("#account-search", chromedp.ByID), chromedp.ActionFunc(waitNewPage))
		var got []string
		c.run("read the accounts", chromedp.Evaluate(`Array.from(document.querySelectorAll("table#accounts tr[data-account]")).map(function (tr) { return tr.getAttribute("data-account"); })`, &got))
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
	c.open("/console/admin/accounts/"+account, "button#credit", "")
	c.run("fill in the credit",
		chromedp.SetValue("#credit-amount", usd, chromedp.ByID),
		chromedp.SetValue("#credit-note", note, chromedp.ByID))
	c.submit("credit the account", "button#credit")
	amt, _ := pricing.ParseUSD(usd)
	c.open("/console/admin/accounts/"+account, "#balance", "admin-account")
	c.checkAmount("#balance", before+amt)
	es, err := c.e.charges(account, 1)
	if err != nil || len(es) != 1 || es[0].Kind != store.KindCredit || es[0].Amount != amt || es[0].Note != note {
		c.t.Errorf("the journal's last entry is %+v (%v), want a credit of %s noted %q", es, err, amt, note)
	}
}
