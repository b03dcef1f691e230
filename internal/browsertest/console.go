package browsertest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/chromedp/chromedp"

	"github.com/modelrelay/modelrelay/pricing"
)

// The web console's pages as a user walks them. Each step waits for the
// page it leads to and fails the test, with that page's text, when it does
// not come; what the step should have changed on the server is the
// caller's to check.

// SetPassword opens a login's one-time setup link and sets its password.
func (c *Tab) SetPassword(link, password string) {
	c.tb.Helper()
	c.Run("open the setup link", chromedp.Navigate(link), chromedp.WaitVisible("#password2", chromedp.ByID))
	c.Screenshot("setup")
	c.Run("fill in the new password",
		chromedp.SetValue("#password", password, chromedp.ByID),
		chromedp.SetValue("#password2", password, chromedp.ByID))
	c.Submit("set the password", "button#set-password")
	if c.Has("#password2") {
		c.tb.Fatalf("the setup page is still shown after setting the password: %q", c.Text("body"))
	}
}

// SignIn signs in as an account holder, signing out first if setting the
// password already signed in, and lands on the overview (its #balance
// shown).
func (c *Tab) SignIn(email, password string) {
	c.tb.Helper()
	c.Run("open the sign-in page", chromedp.Navigate(c.base+"/console/signin"))
	if c.Has("button#signout") {
		c.Submit("sign out", "button#signout")
		c.Run("open the sign-in page", chromedp.Navigate(c.base+"/console/signin"))
	}
	c.Run("wait for the sign-in form", chromedp.WaitVisible("#email", chromedp.ByID))
	c.Screenshot("signin")
	c.Run("fill in the sign-in form",
		chromedp.SetValue("#email", email, chromedp.ByID),
		chromedp.SetValue("#password", password, chromedp.ByID))
	c.Submit("sign in", "button#signin")
	c.Open("/console/", "#balance", "")
}

// CheckAmount checks that the element sel shows want: its text to the cent
// at least, and exactly in its title when the text is rounded.
func (c *Tab) CheckAmount(sel string, want pricing.Nano) {
	c.tb.Helper()
	var text, title string
	var ok bool
	c.Run("read "+sel, chromedp.Text(sel, &text, chromedp.ByQuery),
		chromedp.AttributeValue(sel, "title", &title, &ok, chromedp.ByQuery))
	shown, err := ParseShownUSD(text)
	exact := shown
	if ok && title != "" {
		exact, err = ParseShownUSD(title)
	}
	const cent = pricing.NanoPerUSD / 100
	if err != nil || exact != want || shown-want >= cent || want-shown >= cent {
		c.tb.Errorf("%s shows %q (title %q), want %s (exactly, in the title if the text is rounded) (%v)", sel, text, title, want, err)
	}
}

// ParseShownUSD reads an amount as a page shows it ("$1,234.5", "−$0.01",
// "0.000123") into exact nano-USD.
func ParseShownUSD(s string) (pricing.Nano, error) {
	s = strings.NewReplacer("$", "", ",", "", " ", "", "\u00a0", "", "\u2212", "-", "US", "").Replace(strings.TrimSpace(s))
	return pricing.ParseSignedUSD(s)
}

// KeyForm is what a holder types into the new-key form; an empty field is
// left as the form has it.
type KeyForm struct {
	Label, Route, Limit, Reset, Expires, Allow string
}

// CreateKey creates a key with the keys page's form and returns its text,
// read from the page that shows it once.
func (c *Tab) CreateKey(f KeyForm) string {
	c.tb.Helper()
	c.Open("/console/keys", "button#create-key", "")
	var fill []chromedp.Action
	for _, fv := range []struct{ id, v string }{
		{"#key-label", f.Label}, {"#key-route", f.Route}, {"#key-limit", f.Limit},
		{"#key-reset", f.Reset}, {"#key-expires", f.Expires}, {"#key-allow", f.Allow},
	} {
		if fv.v != "" {
			fill = append(fill, chromedp.SetValue(fv.id, fv.v, chromedp.ByID))
		}
	}
	c.Run("fill in the new key's form", fill...)
	c.Submit("create the key", "button#create-key")
	plain := strings.TrimSpace(c.Text("code#new-key"))
	if !strings.HasPrefix(plain, "sk-") {
		c.tb.Fatalf("the new key reads %q", plain)
	}
	return plain
}

// CallRow is a row of the recent calls as the page shows it.
type CallRow struct {
	ID    string `json:"id"`
	Model string `json:"model"`
	Cost  string `json:"cost"`
}

// CallRow opens the recent calls (screenshot "calls") and returns the row
// of the call requestID, failing the test when it is not listed.
func (c *Tab) CallRow(requestID string) CallRow {
	c.tb.Helper()
	c.Open("/console/calls", fmt.Sprintf("table#calls tr[data-request-id=%q]", requestID), "calls")
	var rows []CallRow
	c.Run("read the calls", chromedp.Evaluate(`Array.from(document.querySelectorAll("table#calls tr[data-request-id]")).map(function (tr) {
	  var m = tr.querySelector("td.model"), c = tr.querySelector("td.cost");
	  return {id: tr.getAttribute("data-request-id"), model: m ? m.textContent.trim() : "", cost: c ? c.textContent.trim() : ""};
	})`, &rows))
	i := slices.IndexFunc(rows, func(r CallRow) bool { return r.ID == requestID })
	if i < 0 {
		c.tb.Fatalf("the call %s is not among the rows %+v", requestID, rows)
	}
	return rows[i]
}

// RevokeKey revokes the key id from its row on the keys page, checks the
// row says so and saves a screenshot ("keys").
func (c *Tab) RevokeKey(id string) {
	c.tb.Helper()
	row := fmt.Sprintf("table#keys tr[data-key-id=%q]", id)
	c.Open("/console/keys", row+" button.revoke", "")
	c.Submit("revoke the key", row+" button.revoke")
	c.Run("wait for the key to read revoked", chromedp.WaitVisible(row+" .status", chromedp.ByQuery))
	if s := c.Text(row + " .status"); !strings.Contains(strings.ToLower(s), "revoked") {
		c.tb.Errorf("the revoked key's status reads %q", s)
	}
	c.Screenshot("keys")
}
