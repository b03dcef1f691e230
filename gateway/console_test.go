package gateway

import (
	"context"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/console"
	"github.com/modelrelay/modelrelay/store"
)

// browser is a console client: a cookie jar, redirects not followed, and
// the last page's CSRF token.
type browser struct {
	t    *testing.T
	e    *env
	c    *http.Client
	csrf string
	hdr  http.Header // sent with every request
}

func newBrowser(t *testing.T, e *env) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, e: e, hdr: http.Header{}, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) send(req *http.Request) (int, http.Header, string) {
	b.t.Helper()
	for k, v := range b.hdr {
		req.Header[k] = v
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if m := csrfField.FindSubmatch(body); m != nil {
		b.csrf = html.UnescapeString(string(m[1]))
	}
	return resp.StatusCode, resp.Header, string(body)
}

// get fetches path, following the console's redirects.
func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	for range 5 {
		req, _ := http.NewRequest("GET", b.e.url+path, nil)
		st, h, body := b.send(req)
		if st != http.StatusSeeOther && st != http.StatusFound {
			return st, body
		}
		path = h.Get("Location")
	}
	b.t.Fatalf("GET %s: too many redirects", path)
	return 0, ""
}

// post submits a form with the last page's CSRF token (unless form has
// one), following a redirect with GET.
func (b *browser) post(path string, form url.Values) (int, string) {
	b.t.Helper()
	if !form.Has("csrf") {
		form.Set("csrf", b.csrf)
	}
	req, _ := http.NewRequest("POST", b.e.url+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	st, h, body := b.send(req)
	if st == http.StatusSeeOther {
		return b.get(h.Get("Location"))
	}
	return st, body
}

func (b *browser) cookie(name string) string {
	u, _ := url.Parse(b.e.url + "/console/")
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// operator signs in with the admin token.
func (b *browser) operator() {
	b.t.Helper()
	b.get("/console/signin")
	if st, body := b.post("/console/signin/operator", url.Values{"token": {testAdminToken}}); st != 200 || !strings.Contains(body, `id="signout"`) {
		b.t.Fatalf("operator sign-in: %d %s", st, body)
	}
}

var setupLinkRe = regexp.MustCompile(`<code id="setup-link">([^<]+)</code>`)

// holderBrowser issues a login for email on account (as the operator) and sets
// its password through the link; the returned browser is signed in.
func holderBrowser(t *testing.T, e *env, account, email, password string) *browser {
	t.Helper()
	op := newBrowser(t, e)
	op.operator()
	op.get("/console/admin/accounts/" + account)
	st, body := op.post("/console/admin/accounts/"+account+"/login", url.Values{"email": {email}})
	m := setupLinkRe.FindStringSubmatch(body)
	if st != http.StatusCreated || m == nil {
		t.Fatalf("issue login: %d %s", st, body)
	}
	link := html.UnescapeString(m[1])
	if !strings.HasPrefix(link, e.url+"/console/setup/rls-") {
		t.Fatalf("setup link %q", link)
	}
	b := newBrowser(t, e)
	path := strings.TrimPrefix(link, e.url)
	if st, _ := b.get(path); st != 200 {
		t.Fatalf("setup page: %d", st)
	}
	if st, body := b.post(path, url.Values{"password": {password}, "password2": {password}}); st != 200 || !strings.Contains(body, `id="balance"`) {
		t.Fatalf("set password: %d %s", st, body)
	}
	return b
}

// TestConsoleHolderFlow: the operator credits an account and issues a
// login; the holder sets a password, creates a key (shown once), calls the
// API with it, sees the call with the journal's exact cost in recent calls,
// the CSV and the chart, and revokes the key, which stops working at once.
func TestConsoleHolderFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "10")
	b := holderBrowser(t, e, "acme", "Alice@Example.com", "correct horse battery")
	_, body := b.get("/console/")
	if !strings.Contains(body, `<dd id="balance" title="$10">$10.00</dd>`) {
		t.Fatalf("overview: %s", body)
	}
	b.get("/console/keys")
	st, body := b.post("/console/keys", url.Values{"label": {"ci"}, "route": {"auto"}, "limit": {"5"}, "reset": {"monthly"},
		"expires": {time.Now().AddDate(0, 1, 0).Format("2006-01-02")}, "allow": {"127.0.0.1, 10.0.0.0/8"}, "exclude": {""}})
	m := regexp.MustCompile(`<code id="new-key">(sk-[^<]+)</code>`).FindStringSubmatch(body)
	if st != http.StatusCreated || m == nil || !strings.Contains(body, `id="copy-key"`) {
		t.Fatalf("create key: %d %s", st, body)
	}
	key := m[1]
	if _, again := b.get("/console/keys"); strings.Contains(again, key) || strings.Contains(again, `id="new-key"`) {
		t.Fatal("the key is shown again")
	}
	ks, _ := e.store.ListKeys(context.Background(), "acme")
	if len(ks) != 1 || ks[0].Label != "ci" || ks[0].Limit != 5_000_000_000 || ks[0].Reset != store.ResetMonthly || len(ks[0].Allow) != 2 {
		t.Fatalf("stored key: %+v", ks)
	}
	st, hdr, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hi", `"max_tokens":8`))
	if st != 200 {
		t.Fatalf("call: %d %s", st, data)
	}
	rid := hdr.Get("X-Request-Id")
	es, _ := e.charges("acme", 1)
	cost := (-es[0].Amount).String()
	_, body = b.get("/console/calls")
	row := regexp.MustCompile(`(?s)<tr data-request-id="` + regexp.QuoteMeta(rid) + `">.*?</tr>`).FindString(body)
	if !strings.Contains(row, `<td class="cost">`+cost+`</td>`) || !strings.Contains(row, `<td class="model">modelf-flash</td>`) {
		t.Fatalf("calls row for %s (cost %s): %q", rid, cost, row)
	}
	_, csvBody := b.get("/console/calls.csv?model=modelf-flash")
	if !strings.Contains(csvBody, rid+","+ks[0].ID+",modelf-flash,") || !strings.Contains(csvBody, ","+cost+",false,") {
		t.Fatalf("csv: %s", csvBody)
	}
	_, body = b.get("/console/?key=" + ks[0].ID)
	day := time.Now().UTC().Format("2006-01-02")
	if !strings.Contains(body, `data-model="modelf-flash" data-day="`+day+`" data-usd="`+cost+`"`) {
		t.Fatalf("chart: %s", body)
	}
	if st, body := b.get("/console/prices"); st != 200 || !strings.Contains(body, `<tr data-model="modelf-flash">`) {
		t.Fatalf("prices: %d %s", st, body)
	}
	b.get("/console/keys")
	if st, body := b.post("/console/keys/"+ks[0].ID+"/limits", url.Values{"limit": {"2.5"}, "reset": {"daily"}}); st != 200 || !strings.Contains(body, "limits were changed") {
		t.Fatalf("change limits: %d %s", st, body)
	}
	if st, body := b.post("/console/keys/"+ks[0].ID+"/limits", url.Values{"limit": {"-2"}}); st != 400 || !strings.Contains(body, "limit:") {
		t.Fatalf("a negative limit: %d %s", st, body)
	}
	if ks, _ = e.store.ListKeys(context.Background(), "acme"); ks[0].Limit != 2_500_000_000 || ks[0].Reset != store.ResetDaily || ks[0].Label != "ci" {
		t.Fatalf("after changing limits: %+v", ks[0])
	}
	if st, body := b.post("/console/keys", url.Values{"route": {"nowhere"}}); st != 400 || !strings.Contains(body, "route &#34;nowhere&#34; is not configured") {
		t.Fatalf("an unknown route: %d %s", st, body)
	}
	if st, body := b.post("/console/keys/"+ks[0].ID+"/revoke", url.Values{}); st != 200 || !strings.Contains(body, `<td class="status">revoked</td>`) {
		t.Fatalf("revoke: %d %s", st, body)
	}
	if st, _, _ := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "hi", `"max_tokens":8`)); st != 401 {
		t.Fatalf("revoked key: %d", st)
	}
}

// TestConsoleOperator: the operator creates an account, credits it with a
// note, searches, and sees lines and plugins; the holder's page shows the
// new balance.
func TestConsoleOperator(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	op := newBrowser(t, e)
	op.operator()
	op.get("/console/admin/accounts")
	if st, body := op.post("/console/admin/accounts", url.Values{"id": {"acme"}}); st != 200 || !strings.Contains(body, `id="credit-amount"`) {
		t.Fatalf("create account: %d %s", st, body)
	}
	if st, body := op.post("/console/admin/accounts", url.Values{"id": {"acme"}}); st != http.StatusConflict || !strings.Contains(body, "exists already") {
		t.Fatalf("create again: %d %s", st, body)
	}
	if st, body := op.post("/console/admin/accounts/acme/credit", url.Values{"amount": {"12.50"}, "note": {"invoice 7"}}); st != 200 ||
		!strings.Contains(body, `<dd id="balance" title="$12.5">$12.50</dd>`) {
		t.Fatalf("credit: %d %s", st, body)
	}
	if st, body := op.post("/console/admin/accounts/acme/credit", url.Values{"amount": {"-1"}}); st != 400 || !strings.Contains(body, "amount:") {
		t.Fatalf("negative credit: %d %s", st, body)
	}
	es, _ := e.charges("acme", 1)
	if len(es) != 1 || es[0].Note != "invoice 7" || es[0].Kind != store.KindCredit {
		t.Fatalf("journal: %+v", es)
	}
	e.account("acorn", "")
	e.account("zeta", "")
	_, body := op.get("/console/admin/accounts?q=ac")
	if !strings.Contains(body, `data-account="acme"`) || !strings.Contains(body, `data-account="acorn"`) || strings.Contains(body, `data-account="zeta"`) {
		t.Fatalf("search: %s", body)
	}
	_, body = op.get("/console/admin/lines")
	if !strings.Contains(body, `<tr data-line="std-a">`) || !strings.Contains(body, `id="plugins"`) || !strings.Contains(body, "modelf-flash") {
		t.Fatalf("lines: %s", body)
	}
	b := holderBrowser(t, e, "acme", "bob@example.com", "another long password")
	if _, body := b.get("/console/"); !strings.Contains(body, `$12.50</dd>`) {
		t.Fatalf("holder overview: %s", body)
	}
	// The holder cannot open the operator's pages, nor the operator the holder's.
	if st, _ := b.get("/console/admin/accounts"); st != 404 {
		t.Errorf("holder on the accounts page: %d", st)
	}
	if st, _ := op.get("/console/keys"); st != 404 {
		t.Errorf("operator on the keys page: %d", st)
	}
}

// TestConsoleCSRF: a state-changing form without its token, with a wrong
// one, or posted cross-site is refused 403 and changes nothing; so are
// the sign-in and setup forms without their pre-session token.
func TestConsoleCSRF(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "1")
	b := holderBrowser(t, e, "acme", "alice@example.com", "correct horse battery")
	b.get("/console/keys")
	good := b.csrf
	for name, tok := range map[string]string{"missing": "", "wrong": good[:len(good)-2] + "xx"} {
		if st, body := b.post("/console/keys", url.Values{"csrf": {tok}, "route": {"auto"}}); st != 403 || !strings.Contains(body, "security token") {
			t.Errorf("%s token: %d", name, st)
		}
	}
	b.hdr.Set("Sec-Fetch-Site", "cross-site")
	if st, _ := b.post("/console/keys", url.Values{"csrf": {good}, "route": {"auto"}}); st != 403 {
		t.Errorf("cross-site: %d", st)
	}
	b.hdr.Del("Sec-Fetch-Site")
	if ks, _ := e.store.ListKeys(context.Background(), "acme"); len(ks) != 0 {
		t.Fatalf("a refused form made a key: %+v", ks)
	}
	if st, _ := b.post("/console/signout", url.Values{"csrf": {"nope"}}); st != 403 {
		t.Errorf("sign-out without the token: %d", st)
	}

	fresh := newBrowser(t, e)
	if st, _ := fresh.post("/console/signin", url.Values{"email": {"alice@example.com"}, "password": {"correct horse battery"}}); st != 403 {
		t.Errorf("sign-in without a pre-session: %d", st)
	}
	fresh.get("/console/signin")
	if st, _ := fresh.post("/console/signin", url.Values{"csrf": {"forged"}, "email": {"alice@example.com"}, "password": {"correct horse battery"}}); st != 403 {
		t.Errorf("sign-in with a forged token: %d", st)
	}
	if st, _ := fresh.post("/console/signin/operator", url.Values{"csrf": {"forged"}, "token": {testAdminToken}}); st != 403 {
		t.Errorf("operator sign-in with a forged token: %d", st)
	}
	if fresh.cookie("relay_console") != "" {
		t.Fatal("a refused sign-in set a session")
	}
	if st, _ := fresh.post("/console/signin", url.Values{"email": {"alice@example.com"}, "password": {"correct horse battery"}}); st != 200 || fresh.cookie("relay_console") == "" {
		t.Errorf("sign-in with the page's token: %d", st)
	}
}

// TestConsoleIsolation: one account's session cannot read or act on
// another account's keys or calls: 404, as for keys that do not exist.
func TestConsoleIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	e.account("globex", "5")
	other := e.key("globex", "auto")
	if st, _, _ := e.do("POST", "/v1/chat/completions", other, chatBody("modelf-flash", "hi", `"max_tokens":8`)); st != 200 {
		t.Fatal("globex call failed")
	}
	ks, _ := e.store.ListKeys(context.Background(), "globex")
	gid := ks[0].ID
	b := holderBrowser(t, e, "acme", "alice@example.com", "correct horse battery")
	for _, p := range []string{"/console/calls?key=" + gid, "/console/calls.csv?key=" + gid, "/console/?key=" + gid} {
		if st, body := b.get(p); st != 404 || strings.Contains(body, "globex") {
			t.Errorf("GET %s: %d", p, st)
		}
	}
	b.get("/console/keys")
	if st, _ := b.post("/console/keys/"+gid+"/revoke", url.Values{}); st != 404 {
		t.Errorf("revoke another account's key: %d", st)
	}
	b.get("/console/keys")
	if st, _ := b.post("/console/keys/"+gid+"/limits", url.Values{"limit": {"1"}}); st != 404 {
		t.Errorf("change another account's key: %d", st)
	}
	if ks, _ := e.store.ListKeys(context.Background(), "globex"); ks[0].Revoked || ks[0].Limit != 0 {
		t.Fatalf("globex's key changed: %+v", ks[0])
	}
	_, body := b.get("/console/calls")
	_, csvBody := b.get("/console/calls.csv")
	if strings.Contains(body, gid) || strings.Contains(csvBody, gid) || strings.Contains(csvBody, "globex") {
		t.Fatal("acme sees globex's calls")
	}
}

// TestConsoleSigninRateLimit: after 5 failures for one login the next try
// is refused 429 with Retry-After (even with the right password), and
// after 20 from one address every login is.
func TestConsoleSigninRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "1")
	holderBrowser(t, e, "acme", "alice@example.com", "correct horse battery")
	b := newBrowser(t, e)
	b.get("/console/signin")
	try := func(email, pw string) (int, string) {
		req, _ := http.NewRequest("POST", e.url+"/console/signin", strings.NewReader(url.Values{"csrf": {b.csrf}, "email": {email}, "password": {pw}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		st, h, body := b.send(req)
		return st, h.Get("Retry-After") + " " + body
	}
	for i := range 5 {
		if st, _ := try("alice@example.com", "wrong password "+string(rune('a'+i))); st != 401 {
			t.Fatalf("failure %d: %d", i+1, st)
		}
	}
	st, body := try("alice@example.com", "wrong password x")
	if st != 429 || strings.HasPrefix(body, " ") || !strings.Contains(body, "Too many failed attempts") {
		t.Fatalf("6th failure: %d %s", st, body)
	}
	if st, _ := try("alice@example.com", "correct horse battery"); st != 429 {
		t.Fatalf("right password while limited: %d", st)
	}
	// The address: 6 failures so far; 14 more for other logins, then 429.
	for i := range 14 {
		if st, _ := try("nobody"+string(rune('a'+i))+"@example.com", "whatever password"); st != 401 {
			t.Fatalf("address failure %d: %d", 7+i, st)
		}
	}
	if st, _ := try("someone@example.com", "whatever password"); st != 429 {
		t.Fatalf("21st failure from one address: %d", st)
	}
	// Guessing setup links (each a KDF run) is refused from that address too.
	guess := "/console/setup/rls-" + strings.Repeat("A", 43)
	if st, _ := b.post(guess, url.Values{"csrf": {b.csrf}, "password": {"twelve chars"}, "password2": {"twelve chars"}}); st != 429 {
		t.Fatalf("a setup guess from a blocked address: %d", st)
	}
}

// TestConsoleKeysAndCookiesApart: an API key never opens the console (a
// Bearer header is ignored; typed as the admin token it is refused), and
// a console cookie never opens /v1 or /admin.
func TestConsoleKeysAndCookiesApart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "1")
	key := e.key("acme", "auto")
	b := newBrowser(t, e)
	b.hdr.Set("Authorization", "Bearer "+key)
	req, _ := http.NewRequest("GET", e.url+"/console/keys", nil)
	if st, h, _ := b.send(req); st != http.StatusSeeOther || h.Get("Location") != "/console/signin" {
		t.Fatalf("sk- bearer on the console: %d %s", st, h.Get("Location"))
	}
	b.hdr.Set("Authorization", "Bearer "+testAdminToken)
	req, _ = http.NewRequest("GET", e.url+"/console/admin/accounts", nil)
	if st, _, _ := b.send(req); st != http.StatusSeeOther {
		t.Fatalf("admin bearer on the console: %d", st)
	}
	b.hdr.Del("Authorization")
	b.get("/console/signin")
	if st, body := b.post("/console/signin/operator", url.Values{"token": {key}}); st != 401 || !strings.Contains(body, "API keys never open the console") {
		t.Fatalf("sk- key as the admin token: %d %s", st, body)
	}
	h := holderBrowser(t, e, "acme", "alice@example.com", "correct horse battery")
	op := newBrowser(t, e)
	op.operator()
	for _, c := range []*browser{h, op} {
		for _, p := range []string{"/v1/models", "/admin/accounts", "/v1/key"} {
			req, _ := http.NewRequest("GET", e.url+p, nil)
			if st, _, _ := c.send(req); st != 401 {
				t.Errorf("console cookie on %s: %d", p, st)
			}
		}
	}
}

// TestConsoleHeaders: every console answer (pages, assets, errors, the
// sign-in page) carries the CSP and its companions; private pages are not
// cached; no CORS header on the console.
func TestConsoleHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *config.Config) { c.CORS.Origins = []string{"https://app.example"} })
	e.account("acme", "1")
	h := holderBrowser(t, e, "acme", "alice@example.com", "correct horse battery")
	op := newBrowser(t, e)
	op.operator()
	check := func(b *browser, path string, wantStatus int, private bool) {
		t.Helper()
		req, _ := http.NewRequest("GET", e.url+path, nil)
		req.Header.Set("Origin", "https://app.example")
		st, hd, _ := b.send(req)
		if st != wantStatus || hd.Get("Content-Security-Policy") != console.ContentSecurityPolicy ||
			hd.Get("X-Content-Type-Options") != "nosniff" || hd.Get("Referrer-Policy") != "no-referrer" ||
			hd.Get("Access-Control-Allow-Origin") != "" || (private && hd.Get("Cache-Control") != "no-store") {
			t.Errorf("GET %s: %d %v", path, st, hd)
		}
	}
	for _, p := range []string{"/console/", "/console/keys", "/console/calls", "/console/prices"} {
		check(h, p, 200, true)
	}
	check(h, "/console/calls.csv", 200, true)
	for _, p := range []string{"/console/admin/accounts", "/console/admin/accounts/acme", "/console/admin/lines"} {
		check(op, p, 200, true)
	}
	anon := newBrowser(t, e)
	check(anon, "/console/signin", 200, true)
	check(anon, "/console/setup/rls-x", 200, true)
	check(anon, "/console/static/console.css", 200, false)
	check(anon, "/console/static/console.js", 200, false)
	check(anon, "/console/nope", 404, false)
	check(anon, "/console/keys", 303, true)
}

// TestConsoleSessionEnds: sign-out deletes the session on the server (the
// old cookie opens nothing), and a session idle too long or past its max
// age is refused and deleted.
func TestConsoleSessionEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "1")
	b := holderBrowser(t, e, "acme", "alice@example.com", "correct horse battery")
	ctx := context.Background()
	secret := b.cookie("relay_console")
	id := store.HashKey(secret)
	if _, err := e.store.Session(ctx, id); err != nil {
		t.Fatal(err)
	}
	withCookie := func(v string) int {
		req, _ := http.NewRequest("GET", e.url+"/console/keys", nil)
		req.AddCookie(&http.Cookie{Name: "relay_console", Value: v})
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := withCookie(secret); st != 200 {
		t.Fatalf("live session: %d", st)
	}
	b.get("/console/")
	if st, body := b.post("/console/signout", url.Values{}); st != 200 || !strings.Contains(body, `id="signin"`) {
		t.Fatalf("sign-out: %d", st)
	}
	if _, err := e.store.Session(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("session after sign-out: %v", err)
	}
	if st := withCookie(secret); st != http.StatusSeeOther {
		t.Fatalf("old cookie after sign-out: %d", st)
	}

	// Idle: last seen 31 minutes ago.
	b = holderBrowser(t, e, "acme", "alice@example.com", "correct horse battery")
	secret = b.cookie("relay_console")
	id = store.HashKey(secret)
	if err := e.store.TouchSession(ctx, id, time.Now().Add(-31*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if st := withCookie(secret); st != http.StatusSeeOther {
		t.Fatalf("idle session: %d", st)
	}
	if _, err := e.store.Session(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("idle session kept: %v", err)
	}

	// Max age: used a second ago but past its absolute expiry.
	b = holderBrowser(t, e, "acme", "alice@example.com", "correct horse battery")
	secret = b.cookie("relay_console")
	id = store.HashKey(secret)
	s, err := e.store.Session(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	s.Expires = time.Now().Add(-time.Second)
	if err := e.store.DeleteSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.store.PutSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	if st := withCookie(secret); st != http.StatusSeeOther {
		t.Fatalf("expired session: %d", st)
	}
}

// TestConsoleSecretsNotLogged: passwords, the admin token, setup links,
// session cookies and API keys made in the console never reach the log.
func TestConsoleSecretsNotLogged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "1")
	const pw = "correct horse battery staple"
	op := newBrowser(t, e)
	op.operator()
	op.get("/console/admin/accounts/acme")
	_, body := op.post("/console/admin/accounts/acme/login", url.Values{"email": {"alice@example.com"}})
	link := html.UnescapeString(setupLinkRe.FindStringSubmatch(body)[1])
	b := newBrowser(t, e)
	path := strings.TrimPrefix(link, e.url)
	b.get(path)
	b.post(path, url.Values{"password": {pw}, "password2": {pw}})
	b.get("/console/keys")
	_, body = b.post("/console/keys", url.Values{"route": {"auto"}})
	key := regexp.MustCompile(`<code id="new-key">(sk-[^<]+)</code>`).FindStringSubmatch(body)[1]
	anon := newBrowser(t, e)
	anon.get("/console/signin")
	anon.post("/console/signin", url.Values{"email": {"alice@example.com"}, "password": {"wrong " + pw}})
	anon.post("/console/signin/operator", url.Values{"token": {"wrong-" + testAdminToken}})
	logs := e.logs.String()
	if !strings.Contains(logs, "console: sign-in refused") || !strings.Contains(logs, `"endpoint":"console"`) {
		t.Fatalf("the console logged nothing: %s", logs)
	}
	token := strings.TrimPrefix(path, "/console/setup/")
	for name, secret := range map[string]string{"password": pw, "admin token": testAdminToken, "setup token": token,
		"session": b.cookie("relay_console"), "operator session": op.cookie("relay_console"), "key": key} {
		if secret == "" || strings.Contains(logs, secret) {
			t.Errorf("the %s (%q) is in the log", name, secret)
		}
	}
}

// TestConsoleOff: console.enabled false answers 404 under /console/.
func TestConsoleOff(t *testing.T) {
	t.Parallel()
	f := false
	e := newEnv(t, func(c *config.Config) { c.Console.Enabled = &f })
	if st, _, _ := e.do("GET", "/console/signin", "", nil); st != 404 {
		t.Fatalf("/console/signin with the console off: %d", st)
	}
	if e.gw.ConsoleHandler() != nil {
		t.Fatal("a handler for a console that is off")
	}
}

// TestConsoleSigninLimitShared: with Redis the failed sign-ins of one
// login count across replicas: five spread over two, then 429 on either;
// and a session made on one replica works on the other.
func TestConsoleSigninLimitShared(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withRedis(t, redisURL(t)))
	e.account("acme", "1")
	h := holderBrowser(t, e, "acme", "alice@example.com", "correct horse battery")
	r2 := e.replica(nil)
	other := newBrowser(t, r2)
	other.c.Jar = h.c.Jar // the same browser, the other replica
	if st, body := other.get("/console/"); st != 200 || !strings.Contains(body, `id="balance"`) {
		t.Fatalf("the session on the other replica: %d", st)
	}
	bs := []*browser{newBrowser(t, e), newBrowser(t, r2)}
	for _, b := range bs {
		b.get("/console/signin")
	}
	for i := range 5 {
		if st, _ := bs[i%2].post("/console/signin", url.Values{"email": {"alice@example.com"}, "password": {"wrong password"}}); st != 401 {
			t.Fatalf("failure %d: %d", i+1, st)
		}
	}
	if st, _ := bs[1].post("/console/signin", url.Values{"email": {"alice@example.com"}, "password": {"wrong password"}}); st != 429 {
		t.Fatalf("6th failure, on the second replica: %d", st)
	}
}
