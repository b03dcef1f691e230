package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/admin"
	"github.com/modelrelay/modelrelay/store"
)

// issueLogin posts to /admin/accounts/{account}/login and decodes a 201.
func issueLogin(t *testing.T, e *env, account, email string) admin.LoginView {
	t.Helper()
	st, _, data := e.do("POST", "/admin/accounts/"+account+"/login", testAdminToken, map[string]string{"email": email})
	var v admin.LoginView
	if st != 201 || json.Unmarshal(data, &v) != nil {
		t.Fatalf("issue login %s on %s: %d %s", email, account, st, data)
	}
	return v
}

// TestAdminIssueLogin: the operator gives an account holder a console
// login; the answer's link carries a token the store keeps only as its
// hash, which sets the password once; issuing again replaces the link and
// keeps the login; the token is never logged.
func TestAdminIssueLogin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.account("acme", "5")
	e.account("globex", "")
	before := time.Now().UTC().Truncate(time.Second)
	v := issueLogin(t, e, "acme", "  Alice@Example.COM ")
	token, ok := strings.CutPrefix(v.SetupLink, e.url+"/console/setup/")
	if v.Email != "alice@example.com" || v.Account != "acme" || !ok || !strings.HasPrefix(token, store.SetupTokenPrefix) || len(token) != 47 {
		t.Fatalf("issued: %+v", v)
	}
	exp, err := time.Parse(time.RFC3339, v.Expires)
	if err != nil || exp.Before(before.Add(admin.SetupValidity)) || exp.After(time.Now().Add(admin.SetupValidity)) {
		t.Errorf("expires %q, want 24 hours from now", v.Expires)
	}
	l, err := e.store.Login(ctx, "alice@example.com")
	if err != nil || l.SetupHash != store.HashKey(token) || l.Account != "acme" || l.PasswordHash != "" {
		t.Fatalf("the stored login: %+v, %v", l, err)
	}

	again := issueLogin(t, e, "acme", "alice@example.com")
	token2 := strings.TrimPrefix(again.SetupLink, e.url+"/console/setup/")
	if token2 == token {
		t.Fatal("issuing again gave the same token")
	}
	if _, err := e.store.SetPassword(ctx, store.HashKey(token), "$argon2id$x", time.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the replaced link still sets the password: %v", err)
	}
	if got, err := e.store.SetPassword(ctx, store.HashKey(token2), "$argon2id$x", time.Now()); err != nil || got.Email != "alice@example.com" {
		t.Errorf("the new link: %+v, %v", got, err)
	}
	// A third link keeps the password until it is used.
	issueLogin(t, e, "acme", "alice@example.com")
	if l, _ := e.store.Login(ctx, "alice@example.com"); l.PasswordHash != "$argon2id$x" {
		t.Errorf("issuing a link dropped the password: %+v", l)
	}
	for _, tok := range []string{token, token2, store.HashKey(token2)} {
		if strings.Contains(e.logs.String(), tok) {
			t.Errorf("the logs hold a setup token or its hash")
		}
	}
}

// Bad input is a 4xx naming what is wrong: the email (400 invalid_email),
// an unknown account (404), another account's email (409 exists), a body
// field that does not exist (400), and no admin token or an API key (401).
func TestAdminIssueLoginErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	e.account("globex", "")
	issueLogin(t, e, "acme", "alice@example.com")
	key := e.key("acme", "standard")
	cases := []struct {
		name, account, token string
		body                 any
		status               int
		code                 any
		msg                  string
	}{
		{"no email", "acme", testAdminToken, map[string]string{}, 400, "invalid_email", "email"},
		{"not an address", "acme", testAdminToken, map[string]string{"email": "alice"}, 400, "invalid_email", "email"},
		{"display name", "acme", testAdminToken, map[string]string{"email": "Alice <alice@example.com>"}, 400, "invalid_email", "email"},
		{"too long", "acme", testAdminToken, map[string]string{"email": strings.Repeat("a", 250) + "@x.io"}, 400, "invalid_email", "254 bytes"},
		{"email a number", "acme", testAdminToken, `{"email": 7}`, 400, "invalid_email", "email"},
		{"unknown field", "acme", testAdminToken, map[string]string{"email": "a@b.io", "name": "A"}, 400, nil, "name"},
		{"unknown account", "nobody", testAdminToken, map[string]string{"email": "bob@example.com"}, 404, "not_found", `"nobody"`},
		{"another account's", "globex", testAdminToken, map[string]string{"email": "ALICE@example.com"}, 409, "exists", "alice@example.com"},
		{"no token", "acme", "", map[string]string{"email": "bob@example.com"}, 401, nil, "admin token"},
		{"an API key", "acme", key, map[string]string{"email": "bob@example.com"}, 401, nil, "API keys"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, _, data := e.do("POST", "/admin/accounts/"+c.account+"/login", c.token, c.body)
			if st != c.status {
				t.Fatalf("%d, want %d: %s", st, c.status, data)
			}
			msg, _, code := errBody(t, data)
			if (c.code != nil && code != c.code) || !strings.Contains(msg, c.msg) {
				t.Errorf("code %v, message %q; want %v and %q", code, msg, c.code, c.msg)
			}
		})
	}
	if l, err := e.store.Login(context.Background(), "alice@example.com"); err != nil || l.Account != "acme" {
		t.Errorf("after the refusals, alice's login: %+v, %v", l, err)
	}
	if _, err := e.store.Login(context.Background(), "bob@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused request made bob's login: %v", err)
	}
}

// The endpoint answers as openapi.json documents it.
func TestOpenAPIConformanceConsoleLogin(t *testing.T) {
	t.Parallel()
	c := loadConformance(t)
	e := newEnv(t)
	e.account("acme", "5")
	e.account("globex", "")
	admin := map[string]string{"Authorization": "Bearer " + testAdminToken}
	for _, x := range []exchange{
		{name: "issued", method: "POST", path: "/admin/accounts/acme/login", header: admin, body: []byte(`{"email":"alice@example.com"}`), wantStatus: 201},
		{name: "not an address", method: "POST", path: "/admin/accounts/acme/login", header: admin, body: []byte(`{"email":"alice"}`), wantStatus: 400},
		{name: "no email", method: "POST", path: "/admin/accounts/acme/login", header: admin, body: []byte(`{}`), wantStatus: 400, wantInvalid: true},
		{name: "unknown account", method: "POST", path: "/admin/accounts/nobody/login", header: admin, body: []byte(`{"email":"bob@example.com"}`), wantStatus: 404},
		{name: "another account's", method: "POST", path: "/admin/accounts/globex/login", header: admin, body: []byte(`{"email":"alice@example.com"}`), wantStatus: 409},
		{name: "no token", method: "POST", path: "/admin/accounts/acme/login", body: []byte(`{"email":"bob@example.com"}`), wantStatus: 401, wantInvalid: true},
	} {
		t.Run(x.name, func(t *testing.T) { c.run(t, e, x) })
	}
}
