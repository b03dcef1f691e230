package console

import (
	"bytes"
	"encoding/csv"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// TestSpendSums: the chart sums charges less refunds per UTC day and
// model exactly, counts only the chosen key when one is, and leaves out
// credits, recoveries and entries outside the 30 days.
func TestSpendSums(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	s := newSpend(now)
	if want := time.Date(2026, 10, 29, 0, 0, 0, 0, time.UTC); !s.from.Equal(want) || !s.to().Equal(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("range %s – %s", s.from, s.to())
	}
	day := func(d int, h int) time.Time { return time.Date(2026, 11, d, h, 0, 0, 0, time.UTC) }
	entries := []store.Entry{
		{Kind: store.KindCharge, Model: "m-a", KeyID: "key_1", Amount: -123, Time: day(27, 0)},
		{Kind: store.KindCharge, Model: "m-a", KeyID: "key_2", Amount: -1_000_000_001, Time: day(27, 9)},
		{Kind: store.KindCharge, Model: "m-b", KeyID: "key_1", Amount: -7, Time: day(26, 23)},
		{Kind: store.KindRefund, Model: "m-b", KeyID: "key_1", Amount: 5, Time: day(26, 23)},
		{Kind: store.KindCredit, Amount: 10_000_000_000, Time: day(27, 1)},
		{Kind: store.KindRecovery, Model: "m-a", KeyID: "key_1", Time: day(27, 1)},
		{Kind: store.KindCharge, Model: "m-a", KeyID: "key_1", Amount: -999, Time: time.Date(2026, 10, 28, 23, 59, 59, 0, time.UTC)},
		{Kind: store.KindCharge, Model: "m-a", KeyID: "key_1", Amount: -1, Time: time.Date(2026, 10, 29, 0, 0, 0, 0, time.UTC)},
	}
	for _, e := range entries {
		s.add(e, "")
	}
	if got := s.byDay[29]["m-a"]; got != 1_000_000_124 {
		t.Errorf("today m-a: %d", got)
	}
	if got := s.byDay[28]["m-b"]; got != 2 {
		t.Errorf("yesterday m-b: %d", got)
	}
	if got := s.byDay[0]["m-a"]; got != 1 {
		t.Errorf("first day m-a: %d", got)
	}
	if s.totals["m-a"] != 1_000_000_125 || s.totals["m-b"] != 2 {
		t.Errorf("totals %v", s.totals)
	}
	v := s.view()
	var usd []string
	for _, b := range v.Bars {
		usd = append(usd, b.Day+" "+b.Model+" "+b.USD+" "+b.Class)
	}
	want := []string{"2026-10-29 m-a 0.000000001 c0", "2026-11-26 m-b 0.000000002 c1", "2026-11-27 m-a 1.000000124 c0"}
	if strings.Join(usd, "|") != strings.Join(want, "|") {
		t.Errorf("bars %q, want %q", usd, want)
	}
	if v.Legend[0].Model != "m-a" || v.Legend[0].Total != "1.000000125" || v.Ticks[4].Label != "$2" {
		t.Errorf("legend %+v ticks %+v", v.Legend, v.Ticks)
	}

	k := newSpend(now)
	for _, e := range entries {
		k.add(e, "key_1")
	}
	if k.byDay[29]["m-a"] != 123 || k.totals["m-a"] != 124 {
		t.Errorf("key_1 only: %v", k.totals)
	}
}

func TestNiceCeil(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want pricing.Nano }{
		{0, 100}, {1, 100}, {40_600, 50_000}, {10_000_000, 10_000_000}, {10_000_001, 20_000_000},
		{30_000_000, 50_000_000}, {1_000_000_124, 2_000_000_000}, {7_500_000_000, 10_000_000_000},
	} {
		if got := niceCeil(c.in); got != c.want || got%4 != 0 {
			t.Errorf("niceCeil(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestCallsCSV: a row per call with exact cost; cells beginning with a
// formula character are defused, and quoting keeps commas and quotes in
// their cell.
func TestCallsCSV(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	calls := []call{
		{Time: time.Date(2026, 11, 27, 1, 2, 3, 0, time.UTC), RequestID: "req_1", KeyID: "key_1", Model: "=HYPERLINK(\"http://x\",\"y\")",
			Endpoint: "chat_completions", Status: "charged", Usage: pricing.Usage{InputTokens: 12, OutputTokens: 3}, Cost: 123_000, Note: "+1, \"two\""},
		{RequestID: "req_2", Model: "@sum", Status: "refunded", Cost: -5, Note: "-2"},
		{RequestID: "req_3", Model: "\tx", Status: "charged", Note: "\rcmd", Estimated: true},
	}
	if err := writeCalls(rec, calls); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(rec.Body.Bytes())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || strings.Join(rows[0], ",") != strings.Join(csvHeader, ",") {
		t.Fatalf("rows %q", rows)
	}
	col := func(name string) int {
		for i, h := range csvHeader {
			if h == name {
				return i
			}
		}
		t.Fatalf("no column %s", name)
		return 0
	}
	r1 := rows[1]
	if r1[col("model")] != "'=HYPERLINK(\"http://x\",\"y\")" || r1[col("note")] != "'+1, \"two\"" || r1[col("cost_usd")] != "0.000123" ||
		r1[col("input_tokens")] != "12" || r1[col("output_tokens")] != "3" || r1[col("time")] != "2026-11-27T01:02:03Z" {
		t.Errorf("row 1 %q", r1)
	}
	if rows[2][col("model")] != "'@sum" || rows[2][col("note")] != "'-2" || rows[2][col("cost_usd")] != "-0.000000005" {
		t.Errorf("row 2 %q", rows[2])
	}
	if rows[3][col("model")] != "'\tx" || rows[3][col("note")] != "'\rcmd" || rows[3][col("estimated")] != "true" {
		t.Errorf("row 3 %q", rows[3])
	}
}

// TestPasswords: argon2id PHC strings with a fresh salt, verified in both
// directions; tampered or oversized parameters are refused without
// running the KDF; the length rules.
func TestPasswords(t *testing.T) {
	t.Parallel()
	h1, err := hashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := hashPassword("correct horse battery")
	if !regexp.MustCompile(`^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`).MatchString(h1) || h1 == h2 {
		t.Fatalf("hashes %q %q", h1, h2)
	}
	if ok, err := verifyPassword("correct horse battery", h1); !ok || err != nil {
		t.Errorf("right password: %v %v", ok, err)
	}
	if ok, _ := verifyPassword("correct horse batterY", h1); ok {
		t.Error("wrong password accepted")
	}
	for _, bad := range []string{"", "$argon2i$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		strings.Replace(h1, "m=19456", "m=4194304", 1), strings.Replace(h1, "t=2", "t=99", 1), strings.Replace(h1, "v=19", "v=16", 1),
		strings.Replace(h1, "p=1", "p=0", 1), h1 + "$x", "$argon2id$v=19$m=19456,t=2$c2FsdHNhbHQ$aGFzaA"} {
		if _, err := verifyPassword("x", bad); err == nil {
			t.Errorf("hash %q accepted", bad)
		}
	}
	for pw, ok := range map[string]bool{"short": false, "twelve chars": true, "ééééééééééé": false, "éééééééééééé": true,
		strings.Repeat("a", 256): true, strings.Repeat("a", 257): false, "\xff\xfe invalid utf8": false} {
		if err := checkPassword(pw, pw); (err == nil) != ok {
			t.Errorf("checkPassword(%q): %v", pw, err)
		}
	}
	if checkPassword("twelve chars", "twelve charz") == nil {
		t.Error("different passwords accepted")
	}
}

// TestConfigResolve: defaults, and errors that name the key.
func TestConfigResolve(t *testing.T) {
	t.Parallel()
	var c Config
	if err := c.Resolve(); err != nil || !c.On() || c.IdleTimeout != 30*time.Minute || c.MaxAge != 12*time.Hour {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	for _, bad := range []struct {
		c   Config
		key string
	}{
		{Config{IdleTimeout: time.Second}, "console.idle_timeout"},
		{Config{IdleTimeout: time.Hour, MaxAge: time.Minute}, "console.max_age"},
		{Config{PublicURL: "relay.example.com"}, "console.public_url"},
		{Config{PublicURL: "ftp://relay.example.com"}, "console.public_url"},
		{Config{PublicURL: "https://relay.example.com/?x=1"}, "console.public_url"},
	} {
		if err := bad.c.Resolve(); err == nil || !strings.Contains(err.Error(), bad.key) {
			t.Errorf("%+v: %v", bad.c, err)
		}
	}
	c = Config{PublicURL: "https://relay.example.com/"}
	if err := c.Resolve(); err != nil || c.PublicURL != "https://relay.example.com" {
		t.Errorf("public_url %q %v", c.PublicURL, err)
	}
}

// TestParseKeyForm: the form's words and shapes become the admin API's.
func TestParseKeyForm(t *testing.T) {
	t.Parallel()
	f, err := parseKeyForm(url.Values{"label": {"ci"}, "route": {"auto"}, "limit": {"$5.50"}, "reset": {"never"},
		"expires": {"2026-12-31"}, "allow": {"10.0.0.0/8, 127.0.0.1 ::1"}, "exclude": {"m-a,m-b"}})
	if err != nil || f.Route != "auto" || *f.Settings.Label != "ci" || *f.Settings.Limit != "5.50" || *f.Settings.Reset != "none" ||
		*f.Settings.Expires != "2027-01-01T00:00:00Z" || strings.Join(*f.Settings.Allow, "|") != "10.0.0.0/8|127.0.0.1|::1" ||
		strings.Join(f.Exclude, "|") != "m-a|m-b" {
		t.Fatalf("%+v %v", f, err)
	}
	f, err = parseKeyForm(url.Values{"route": {"standard"}, "expires": {"2026-12-31T12:00:00Z"}})
	if err != nil || f.Settings.Label != nil || f.Settings.Limit != nil || f.Settings.Allow != nil || *f.Settings.Expires != "2026-12-31T12:00:00Z" {
		t.Fatalf("%+v %v", f, err)
	}
	for field, v := range map[string]url.Values{
		"route": {}, "limit": {"route": {"auto"}, "limit": {"five"}}, "reset": {"route": {"auto"}, "reset": {"hourly"}},
		"label": {"route": {"auto"}, "label": {strings.Repeat("x", 5000)}},
		"allow": {"route": {"auto"}, "allow": {strings.Repeat("1.2.3.4 ", 65)}},
	} {
		_, err := parseKeyForm(v)
		if e, ok := err.(*Error); !ok || e.Field != field || e.Status != 400 {
			t.Errorf("%s: %v", field, err)
		}
	}
}

func TestSearchAfter(t *testing.T) {
	t.Parallel()
	ids := []string{"ab", "ac", "ac.", "ac-1", "acme", "acz", "ad", "b"}
	for _, p := range []string{"ac", "a", "acme", "b"} {
		after := searchAfter(p)
		for _, id := range ids {
			if strings.HasPrefix(id, p) && id <= after {
				t.Errorf("prefix %q: %q sorts before %q", p, id, after)
			}
		}
	}
}

func FuzzParseKeyForm(f *testing.F) {
	f.Add("route=auto&label=x&limit=5&reset=daily&expires=2026-12-31&allow=10.0.0.0/8&exclude=m")
	f.Add("route=%00&limit=%FF&allow=,,,")
	f.Fuzz(func(t *testing.T, q string) {
		v, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		k, err := parseKeyForm(v)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if k.Route == "" || len(k.Exclude) > maxList || (k.Settings.Allow != nil && len(*k.Settings.Allow) > maxList) {
			t.Fatalf("%+v", k)
		}
		if k.Settings.Limit != nil {
			if _, err := pricing.ParseUSD(*k.Settings.Limit); err != nil {
				t.Fatalf("limit %q passed", *k.Settings.Limit)
			}
		}
	})
}

func FuzzParseCredit(f *testing.F) {
	f.Add("amount=5&note=invoice")
	f.Add("amount=$0.000000001")
	f.Add("amount=-1")
	f.Fuzz(func(t *testing.T, q string) {
		v, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		amt, note, err := parseCredit(v)
		if err == nil && (amt <= 0 || len(note) > store.MaxNoteLen) {
			t.Fatalf("accepted %d %q", amt, note)
		}
	})
}

func FuzzParseCallFilter(f *testing.F) {
	f.Add("key=key_abc&model=m")
	f.Add("key=%00")
	f.Fuzz(func(t *testing.T, q string) {
		v, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		cf, err := parseCallFilter(v)
		if err == nil && (len(cf.Key) > 64 || len(cf.Model) > 256) {
			t.Fatalf("accepted %+v", cf)
		}
	})
}

func FuzzParsePHC(f *testing.F) {
	h, _ := hashPassword("twelve chars")
	f.Add(h)
	f.Add("$argon2id$v=19$m=1,t=1,p=1$$")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePHC(s)
		if err == nil && (p.memory > 256*1024 || p.time > 16 || p.threads > 16 || p.threads == 0 || len(p.hash) < 16) {
			t.Fatalf("accepted %+v", p)
		}
	})
}

func FuzzPreSession(f *testing.F) {
	c := &Console{secret: []byte("0123456789abcdef0123"), now: time.Now}
	f.Add("abc.123")
	f.Add(strings.Repeat("a", 43) + ".99999999999")
	f.Fuzz(func(t *testing.T, v string) {
		if _, ok := c.preValid(v); ok && c.preMAC(v) == "" {
			t.Fatal("empty MAC")
		}
	})
}

// TestCookies: console cookies are scoped to /console, HttpOnly,
// SameSite=Strict, and Secure exactly when the request came over TLS.
func TestCookies(t *testing.T) {
	t.Parallel()
	c := &Console{}
	for _, u := range []string{"http://relay.test/console/", "https://relay.test/console/"} {
		r := httptest.NewRequest("GET", u, nil)
		ck := c.cookie(r, sessionCookie, "v", 60)
		if ck.Path != "/console" || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure != strings.HasPrefix(u, "https") {
			t.Errorf("%s: %+v", u, ck)
		}
	}
}

// TestPreSessionToken: the sign-in form's token is the MAC of the
// pre-session cookie; another cookie, an expired one or another secret
// does not match.
func TestPreSessionToken(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	c := &Console{secret: []byte("0123456789abcdef0123"), now: func() time.Time { return now }}
	rec := httptest.NewRecorder()
	tok, err := c.preToken(rec, httptest.NewRequest("GET", "/console/signin", nil))
	if err != nil {
		t.Fatal(err)
	}
	ck := rec.Result().Cookies()[0]
	post := func(c *Console, cookie, field string) error {
		r := httptest.NewRequest("POST", "/console/signin", strings.NewReader(url.Values{"csrf": {field}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.AddCookie(&http.Cookie{Name: preCookie, Value: cookie})
		return c.checkPre(r)
	}
	if err := post(c, ck.Value, tok); err != nil {
		t.Fatalf("the page's own token: %v", err)
	}
	other := &Console{secret: []byte("another secret of length"), now: c.now}
	for name, err := range map[string]error{
		"other cookie":  post(c, strings.Repeat("A", 43)+"."+strings.SplitN(ck.Value, ".", 2)[1], tok),
		"other secret":  post(other, ck.Value, tok),
		"empty field":   post(c, ck.Value, ""),
		"tampered time": post(c, strings.SplitN(ck.Value, ".", 2)[0]+".99999999999", tok),
	} {
		if err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	now = now.Add(preLifetime + time.Second)
	if post(c, ck.Value, tok) == nil {
		t.Error("an expired pre-session accepted")
	}
}

func TestAmountAndExpiryText(t *testing.T) {
	t.Parallel()
	for n, want := range map[pricing.Nano]string{0: "$0.00", 2_500_000_000: "$2.50", 2_499_959_400: "$2.4999594", 7_000_000_000: "$7.00", 40_600: "$0.0000406"} {
		if got := money(n); got != want {
			t.Errorf("money(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[pricing.Nano]string{9_999_959_400: "$9.99", 0: "$0.00", -1_500_000_000: "−$1.50"} {
		if got := usd2(n); got != want {
			t.Errorf("usd2(%d) = %q, want %q", n, got, want)
		}
	}
	exp := funcs["expires"].(func(time.Time) string)
	if got := exp(time.Date(2026, 12, 28, 0, 0, 0, 0, time.UTC)); got != "end of 2026-12-27 UTC" {
		t.Errorf("midnight: %q", got)
	}
	if got := exp(time.Date(2026, 12, 28, 12, 30, 0, 0, time.UTC)); got != "2026-12-28 12:30 UTC" {
		t.Errorf("noon: %q", got)
	}
}

// TestTemplatesParse: every page parses with the layout and partials.
func TestTemplatesParse(t *testing.T) {
	t.Parallel()
	if _, err := parsePages(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkHashPassword is the cost of one argon2id run (RATIONALE: the
// console's password parameters).
func BenchmarkHashPassword(b *testing.B) {
	for b.Loop() {
		if _, err := hashPassword("correct horse battery"); err != nil {
			b.Fatal(err)
		}
	}
}
