package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/internal/browsertest"
	"github.com/modelrelay/modelrelay/store"
)

// demoPassword is the password the test sets for the demo account's login.
const demoPassword = "demo console in a browser"

// TestDemoConsoleInBrowser walks relay demo's console in headless Chromium
// the way its output tells a newcomer to: the printed setup link sets the
// demo account's password, the holder signs in and sees the demo's credit,
// creates a key and calls the API with it, finds the call on the calls page
// at the exact charge the admin API reports, and revokes the key, after
// which the API refuses it. Every page visited is kept as a screenshot
// (build/artifacts/demo-console-*.png); a script error or
// Content-Security-Policy violation fails the test.
func TestDemoConsoleInBrowser(t *testing.T) {
	d := startDemo(t)
	base, ok := strings.CutSuffix(d.signin, "/console/signin")
	if !ok || !strings.HasPrefix(d.setup, base+"/console/setup/") {
		t.Fatalf("the demo's console links %q and %q have no common base", d.setup, d.signin)
	}
	tab := browsertest.NewTab(t, browsertest.Start(t, 40*time.Second), base, "demo-console-")
	tab.SetPassword(d.setup, demoPassword)
	tab.SignIn(demoLogin, demoPassword)
	tab.CheckAmount("#balance", demoCredit)
	tab.Screenshot("overview")

	key := tab.CreateKey(browsertest.KeyForm{Label: "browser test", Route: "standard"})
	call := chatCall(t, d.addr, key, false)
	if call.status != http.StatusOK || call.rid == "" {
		t.Fatalf("a call with the console's key = %d (request id %q, error %s)", call.status, call.rid, call.code)
	}
	charge := d.charge(t, call.rid)
	if charge.Route != "standard" {
		t.Errorf("the call was charged on route %q, the key's is standard", charge.Route)
	}
	row := tab.CallRow(call.rid)
	if cost, err := browsertest.ParseShownUSD(row.Cost); err != nil || cost != -charge.Amount || row.Model != charge.Model {
		t.Errorf("the call's row is %+v, want model %s and cost %s exactly (%v)", row, charge.Model, -charge.Amount, err)
	}

	tab.RevokeKey(charge.KeyID)
	if after := chatCall(t, d.addr, key, false); after.status != http.StatusUnauthorized {
		t.Fatalf("a call with the revoked key = %d (%s), want 401", after.status, after.code)
	}
	tab.CheckProblems()
}

// charge is the demo account's journal entry that charged the call rid, as
// the admin API serves it.
func (d *demo) charge(t *testing.T, rid string) store.Entry {
	t.Helper()
	var out struct {
		Data []store.Entry `json:"data"`
	}
	adminGetAs(t, d.addr, d.token, "/admin/accounts/demo/charges", &out)
	for _, e := range out.Data {
		if e.RequestID == rid && e.Kind == store.KindCharge {
			return e
		}
	}
	t.Fatalf("no charge for %s in the demo account's journal: %+v", rid, out.Data)
	return store.Entry{}
}
