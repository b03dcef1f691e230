package main

import (
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/admin"
	"github.com/modelrelay/modelrelay/sim"
)

func TestParseInterleaved(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		server string
		pos    []string
	}{
		{[]string{"sk-abc", "-server", "http://h:1"}, "http://h:1", []string{"sk-abc"}},
		{[]string{"-server", "http://h:1", "sk-abc"}, "http://h:1", []string{"sk-abc"}},
		{[]string{"a", "-server=http://h:2", "b"}, "http://h:2", []string{"a", "b"}},
		{[]string{"--", "-server", "x"}, "default", []string{"-server", "x"}},
		{[]string{"a", "--", "-b"}, "default", []string{"a", "-b"}},
		{nil, "default", nil},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		server := fs.String("server", "default", "")
		pos, err := parseInterleaved(fs, tc.args)
		if err != nil || *server != tc.server || !slices.Equal(pos, tc.pos) {
			t.Errorf("%q: server %q pos %q (%v), want %q %q", tc.args, *server, pos, err, tc.server, tc.pos)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := parseInterleaved(fs, []string{"a", "-nope"}); err == nil {
		t.Error("an unknown flag after a positional argument was accepted")
	}
}

// TestKeysRevokeFlagsAnywhere: relay keys revoke KEY -server URL reaches
// the server at URL, as relay keys revoke -server URL KEY does; a stray
// argument to a subcommand that takes none is an error.
func TestKeysRevokeFlagsAnywhere(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in map[string]string
		_ = json.NewDecoder(r.Body).Decode(&in)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+in["key"]+in["id"])
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"key_abc","account":"acme","route":"auto","exclude":[],"revoked":true,"created":"2026-01-01T00:00:00Z"}`)
	}))
	defer srv.Close()
	t.Setenv("RELAY_ADMIN_TOKEN", "admin-token-for-tests")
	for _, args := range [][]string{
		{"revoke", "sk-secret", "-server", srv.URL},
		{"revoke", "-server", srv.URL, "key_abc"},
	} {
		if err := runKeys(args); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
	}
	want := []string{"POST /admin/keys/revoke sk-secret", "POST /admin/keys/revoke key_abc"}
	if !slices.Equal(got, want) {
		t.Fatalf("requests %q, want %q", got, want)
	}
	if err := runKeys([]string{"list", "acme", "-server", srv.URL}); err == nil || !strings.Contains(err.Error(), `unexpected argument "acme"`) {
		t.Fatalf("keys list acme: %v", err)
	}
	if err := runKeys([]string{"revoke", "a", "b", "-server", srv.URL}); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Fatalf("two keys: %v", err)
	}
}

// adminRecorder is a stand-in gateway that records each admin request's
// method, path and JSON body and answers with a key or an account.
type adminRecorder struct {
	mu   sync.Mutex
	reqs []string
}

func (a *adminRecorder) serve(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.reqs = append(a.reqs, r.Method+" "+r.URL.RequestURI()+" "+strings.TrimSpace(string(body)))
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasPrefix(r.URL.Path, "/admin/accounts"):
			_, _ = io.WriteString(w, `{"id":"acme","balance_usd":"2.000000000","available_usd":"2.000000000","alert_below_usd":"5.000000000","below_alert":true}`)
		case r.URL.Path == "/admin/keys" && r.Method == "GET":
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"key_abc","account":"acme","route":"auto","exclude":[],"label":"ci","limit_usd":"5.000000000",`+
				`"limit_reset":"monthly","spent_usd":"1.250000000","held_usd":"0.000000000","remaining_usd":"3.750000000","allow":["10.0.0.0/8"],"created":"2026-01-01T00:00:00Z"}]}`)
		default:
			_, _ = io.WriteString(w, `{"id":"key_abc","key":"sk-new","account":"acme","route":"auto","exclude":[],"limit_reset":"none","allow":[],"spent_usd":"0.000000000","held_usd":"0.000000000","created":"2026-01-01T00:00:00Z"}`)
		}
	}))
	t.Cleanup(srv.Close)
	t.Setenv("RELAY_ADMIN_TOKEN", "admin-token-for-tests")
	return srv
}

// TestKeySettingsFlags: keys create and keys update send the settings
// given, and only those (an update keeps the rest): amounts as decimal
// text, -allow repeated or comma-separated, and none, 0 clearing.
func TestKeySettingsFlags(t *testing.T) {
	rec := &adminRecorder{}
	srv := rec.serve(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "-account", "acme", "-route", "auto", "-label", "ci agent", "-limit-usd", "5", "-limit-reset", "monthly",
			"-expires", "2026-12-31T00:00:00Z", "-allow", "10.0.0.0/8", "-allow", "192.168.0.0/16, 203.0.113.7"},
			`POST /admin/keys {"account":"acme","allow":["10.0.0.0/8","192.168.0.0/16","203.0.113.7"],"expires":"2026-12-31T00:00:00Z",` +
				`"label":"ci agent","limit_reset":"monthly","limit_usd":"5","route":"auto"}`},
		{[]string{"create", "-account", "acme", "-route", "auto"}, `POST /admin/keys {"account":"acme","route":"auto"}`},
		{[]string{"update", "key_abc", "-limit-usd", "0.10"}, `POST /admin/keys/update {"id":"key_abc","limit_usd":"0.10"}`},
		{[]string{"update", "-limit-usd", "0", "-expires", "none", "-allow", "none", "sk-secret"},
			`POST /admin/keys/update {"allow":[],"expires":"none","key":"sk-secret","limit_usd":"0"}`},
		{[]string{"update", "key_abc", "-label", "", "-limit-reset", "none"}, `POST /admin/keys/update {"id":"key_abc","label":"","limit_reset":"none"}`},
	} {
		rec.reqs = nil
		if err := runKeys(append(tc.args, "-server", srv.URL)); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if len(rec.reqs) != 1 || rec.reqs[0] != tc.want {
			t.Errorf("%q sent %q, want %q", tc.args, rec.reqs, tc.want)
		}
	}
	for _, args := range [][]string{
		{"update", "key_abc"},               // nothing to change
		{"update", "-label", "x"},           // no key
		{"update", "a", "b", "-label", "x"}, // two keys
	} {
		rec.reqs = nil
		if err := runKeys(append(args, "-server", srv.URL)); err == nil || len(rec.reqs) != 0 {
			t.Errorf("%q: %v, sent %q", args, err, rec.reqs)
		}
	}
}

// TestAccountsUpdateFlags: accounts update -alert-below-usd sends the
// threshold as decimal text; without it, nothing is sent.
func TestAccountsUpdateFlags(t *testing.T) {
	rec := &adminRecorder{}
	srv := rec.serve(t)
	if err := runAccounts([]string{"update", "-account", "acme", "-alert-below-usd", "5", "-server", srv.URL}); err != nil {
		t.Fatal(err)
	}
	if want := `POST /admin/accounts/acme/update {"alert_below_usd":"5"}`; len(rec.reqs) != 1 || rec.reqs[0] != want {
		t.Errorf("sent %q, want %q", rec.reqs, want)
	}
	rec.reqs = nil
	if err := runAccounts([]string{"update", "-account", "acme", "-server", srv.URL}); err == nil || len(rec.reqs) != 0 {
		t.Errorf("update without a setting: %v, sent %q", err, rec.reqs)
	}
}

// TestAccountsLogin: accounts login posts the email to the account's login
// endpoint and prints the link alone on the first line, then its expiry;
// without -email, or on the gateway's error, nothing is printed.
func TestAccountsLogin(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(body), "taken@") {
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":{"message":"\"taken@example.com\" is already the console login of another account","type":"invalid_request_error","code":"exists"}}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"email":"alice@example.com","account":"acme","setup_link":"https://relay.example.com/console/setup/rls-abc","expires":"2026-11-28T10:00:00Z"}`)
	}))
	defer srv.Close()
	t.Setenv("RELAY_ADMIN_TOKEN", "admin-token-for-tests")
	c, err := newAdminClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := issueLogin(c, &out, "acme", "Alice@Example.com"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || lines[0] != "https://relay.example.com/console/setup/rls-abc" ||
		!strings.Contains(lines[1], "alice@example.com") || !strings.Contains(lines[1], "expires 2026-11-28T10:00:00Z") {
		t.Errorf("printed %q", out.String())
	}
	if want := `POST /admin/accounts/acme/login {"email":"Alice@Example.com"}`; len(got) != 1 || got[0] != want {
		t.Errorf("sent %q, want %q", got, want)
	}
	out.Reset()
	if err := issueLogin(c, &out, "acme", "taken@example.com"); err == nil || !strings.Contains(err.Error(), "another account") || out.Len() != 0 {
		t.Errorf("a refused login: %v, printed %q", err, out.String())
	}
	if err := runAccounts([]string{"login", "-account", "acme", "-server", srv.URL}); err == nil || !strings.Contains(err.Error(), "-email is required") {
		t.Errorf("without -email: %v", err)
	}
	if len(got) != 2 {
		t.Errorf("%d requests, want 2: %q", len(got), got)
	}
}

// TestPrintKeys: keys list shows each key's settings and its spend in the
// current period, "-" where there is none.
func TestPrintKeys(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	err := printKeys(&b, []admin.KeyView{
		{ID: "key_a", Account: "acme", Route: "auto", Label: "ci", LimitUSD: "5.000000000", LimitReset: "monthly", SpentUSD: "1.250000000",
			HeldUSD: "0.500000000", RemainingUSD: "3.250000000", Expires: "2026-12-31T00:00:00Z", Allow: []string{"10.0.0.0/8", "192.168.0.0/16"}, Created: "2026-01-01T00:00:00Z"},
		{ID: "key_b", Account: "acme", Route: "economy", LimitReset: "none", SpentUSD: "0.000000000", HeldUSD: "0.000000000", Expires: "2026-02-01T00:00:00Z", Expired: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "LIMIT_USD") || !strings.Contains(lines[0], "SPENT_USD") || !strings.Contains(lines[0], "REMAINING_USD") {
		t.Fatalf("%q", lines)
	}
	for _, want := range []string{`"ci"`, "5.000000000", "monthly", "1.250000000", "0.500000000", "3.250000000", "2026-12-31T00:00:00Z", "10.0.0.0/8,192.168.0.0/16"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q lacks %q", lines[1], want)
		}
	}
	if f := strings.Fields(lines[2]); !strings.Contains(lines[2], "(expired)") || f[3] != "-" || f[4] != "-" || f[5] != "none" {
		t.Errorf("row %q", lines[2])
	}
}

// TestAdminCLIKeySettings drives relay keys and relay accounts against a
// running gateway: a key created outside the caller's networks is refused,
// cleared it is served, a tiny limit refuses with key_limit_exceeded,
// keys list shows the limit and spend, and an account's alert shows in
// relay_accounts_below_alert.
func TestAdminCLIKeySettings(t *testing.T) {
	s := httptest.NewServer(sim.New(sim.Options{}))
	defer s.Close()
	dir := t.TempDir()
	addr := freeAddr(t)
	startGateway(t, writeConfig(t, dir, addr, s.URL), addr)
	mustCLI := func(args ...string) string {
		t.Helper()
		out, errOut, code := cli(t, addr, args...)
		if code != 0 {
			t.Fatalf("%q: %d %s %s", args, code, out, errOut)
		}
		return out
	}
	mustCLI("accounts", "create", "-account", "acme")
	mustCLI("accounts", "credit", "-account", "acme", "-usd", "2")
	key := strings.TrimSpace(mustCLI("keys", "create", "-account", "acme", "-route", "economy", "-label", "ci",
		"-limit-usd", "5", "-limit-reset", "monthly", "-expires", time.Now().AddDate(1, 0, 0).UTC().Format(time.RFC3339),
		"-allow", "10.0.0.0/8", "-allow", "192.168.0.0/16,203.0.113.7"))
	call := func() (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(`{"model":"modelf-flash","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := call(); st != 403 || !strings.Contains(body, "address_not_allowed") {
		t.Fatalf("from outside the allow-list: %d %s", st, body)
	}
	mustCLI("keys", "update", key, "-allow", "none")
	if st, body := call(); st != 200 {
		t.Fatalf("with the allow-list cleared: %d %s", st, body)
	}
	list := mustCLI("keys", "list", "-account", "acme")
	for _, want := range []string{"LIMIT_USD", "SPENT_USD", "5.000000000", "monthly", `"ci"`} {
		if !strings.Contains(list, want) {
			t.Errorf("keys list lacks %q:\n%s", want, list)
		}
	}
	if rows := strings.Split(strings.TrimSpace(list), "\n"); len(rows) != 2 || len(strings.Fields(rows[1])) < 7 || strings.Fields(rows[1])[6] == "0.000000000" {
		t.Errorf("keys list shows no spend after a call:\n%s", list)
	}
	mustCLI("keys", "update", key, "-limit-usd", "0.000000001", "-limit-reset", "none")
	if st, body := call(); st != 402 || !strings.Contains(body, "key_limit_exceeded") {
		t.Fatalf("over the key's limit: %d %s", st, body)
	}
	if out := mustCLI("accounts", "update", "-account", "acme", "-alert-below-usd", "5"); !strings.Contains(out, "alert below 5.000000000 USD") {
		t.Errorf("accounts update: %q", out)
	}
	link, _, _ := strings.Cut(mustCLI("accounts", "login", "-account", "acme", "-email", "alice@example.com"), "\n")
	if !strings.HasPrefix(link, "http://"+addr+"/console/setup/rls-") {
		t.Errorf("accounts login printed the link %q", link)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), "\nrelay_accounts_below_alert 1\n") {
		t.Errorf("relay_accounts_below_alert is not 1")
	}
	// Bad settings: one line naming the flag's field, a non-zero exit.
	for _, args := range [][]string{
		{"keys", "create", "-account", "acme", "-route", "economy", "-limit-reset", "yearly"},
		{"keys", "update", key, "-expires", "next week"},
		{"keys", "update", key, "-allow", "10.0.0.0/33"},
		{"accounts", "update", "-account", "acme", "-alert-below-usd", "lots"},
	} {
		out, errOut, code := cli(t, addr, args...)
		if code == 0 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%q: code %d stdout %q stderr %q", args, code, out, errOut)
		}
	}
}
