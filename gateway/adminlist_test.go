package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/admin"
)

// TestAdminListAccounts: GET /admin/accounts asks for the admin token
// (401, not 405) and lists accounts with balance, holds and creation time,
// a page at a time.
func TestAdminListAccounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if st, _, body := e.do("GET", "/admin/accounts", "", nil); st != 401 {
		t.Fatalf("without the admin token: %d %s", st, body)
	}
	if st, _, body := e.do("GET", "/admin/accounts", "sk-not-admin", nil); st != 401 {
		t.Fatalf("with an API key: %d %s", st, body)
	}
	e.account("acme", "2.5")
	e.account("beta", "0")
	e.account("cyan", "1")
	type page struct {
		Object  string              `json:"object"`
		Data    []admin.AccountView `json:"data"`
		HasMore bool                `json:"has_more"`
	}
	get := func(query string) page {
		t.Helper()
		st, _, body := e.do("GET", "/admin/accounts"+query, testAdminToken, nil)
		var p page
		if st != 200 || json.Unmarshal(body, &p) != nil || p.Object != "list" {
			t.Fatalf("%s: %d %s", query, st, body)
		}
		return p
	}
	all := get("")
	if len(all.Data) != 3 || all.HasMore || all.Data[0].ID != "acme" || all.Data[0].BalanceUSD != "2.500000000" || all.Data[2].ID != "cyan" {
		t.Fatalf("all: %+v", all)
	}
	for _, a := range all.Data {
		if _, err := time.Parse(time.RFC3339, a.Created); err != nil {
			t.Errorf("%s: created %q", a.ID, a.Created)
		}
	}
	p1 := get("?limit=2")
	p2 := get("?limit=2&after=" + p1.Data[1].ID)
	if len(p1.Data) != 2 || !p1.HasMore || len(p2.Data) != 1 || p2.HasMore || p2.Data[0].ID != "cyan" {
		t.Fatalf("pages: %+v then %+v", p1, p2)
	}
	for _, q := range []string{"?limit=0", "?limit=501", "?after=a%2Fb"} {
		st, _, body := e.do("GET", "/admin/accounts"+q, testAdminToken, nil)
		if st != 400 {
			t.Errorf("%s: %d %s", q, st, body)
		}
	}
}
