package gateway

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/admin"
	"github.com/modelrelay/modelrelay/internal/testwait"
)

// adminKeyDo sends an admin request and decodes a admin.KeyView from a 2xx.
func adminKeyDo(t *testing.T, e *env, method, path string, body any) admin.KeyView {
	t.Helper()
	st, _, data := e.do(method, path, testAdminToken, body)
	var v admin.KeyView
	if st/100 != 2 || json.Unmarshal(data, &v) != nil {
		t.Fatalf("%s %s: %d %s", method, path, st, data)
	}
	return v
}

// TestAdminKeySettings: a key is created with a label, a spend limit and
// its period, an expiry and an allow-list (canonicalized), shown with its
// spend, changed by POST /admin/keys/update (absent fields kept, "none",
// 0 and [] clearing), and each change applies to the next call at once.
func TestAdminKeySettings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	expires := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	v := adminKeyDo(t, e, "POST", "/admin/keys", map[string]any{"account": "acme", "route": "auto", "label": "ci agent",
		"limit_usd": "5", "limit_reset": "monthly", "expires": expires, "allow": []string{"127.0.0.1", "10.1.2.3/8"}})
	if !strings.HasPrefix(v.Key, "sk-") || v.Label != "ci agent" || v.LimitUSD != "5.000000000" || v.LimitReset != "monthly" ||
		v.Expires != expires || v.Expired || !slices.Equal(v.Allow, []string{"127.0.0.1/32", "10.0.0.0/8"}) ||
		v.SpentUSD != "0.000000000" || v.HeldUSD != "0.000000000" || v.RemainingUSD != "5.000000000" || v.ResetsAt == "" {
		t.Fatalf("created: %+v", v)
	}
	key, id := v.Key, v.ID
	body := chatBody("modelf-flash", "hi", `"max_tokens":8`)
	call := func(want int) {
		t.Helper()
		if st, _, data := e.do("POST", "/v1/chat/completions", key, body); st != want {
			t.Fatalf("call: %d, want %d: %s", st, want, data)
		}
	}
	call(200)
	got := adminKeyDo(t, e, "GET", "/admin/keys/"+id, nil)
	if got.Key != "" || got.SpentUSD == "0.000000000" || got.RemainingUSD >= "5.000000000" || got.ID != id {
		t.Errorf("after a call: %+v", got)
	}

	// Only 10/8 now: this replica's cached record is dropped at once.
	u := adminKeyDo(t, e, "POST", "/admin/keys/update", map[string]any{"id": id, "allow": []string{"10.0.0.0/8"}})
	if u.Label != "ci agent" || u.LimitUSD != "5.000000000" || u.Expires != expires || !slices.Equal(u.Allow, []string{"10.0.0.0/8"}) || u.SpentUSD != got.SpentUSD {
		t.Errorf("after updating the allow-list: %+v", u)
	}
	call(403)
	u = adminKeyDo(t, e, "POST", "/admin/keys/update", map[string]any{"key": key, "allow": []string{}, "limit_usd": 0,
		"expires": "none", "label": "", "limit_reset": "none"})
	if u.Label != "" || u.LimitUSD != "" || u.RemainingUSD != "" || u.LimitReset != "none" || u.Expires != "" || len(u.Allow) != 0 || u.ResetsAt != "" {
		t.Errorf("after clearing: %+v", u)
	}
	call(200)
	// A limit as a JSON number is read as its decimal text.
	u = adminKeyDo(t, e, "POST", "/admin/keys/update", map[string]any{"id": id, "limit_usd": json.Number("0.1"), "limit_reset": "daily"})
	if u.LimitUSD != "0.100000000" || u.LimitReset != "daily" {
		t.Errorf("limit 0.1 daily: %+v", u)
	}
	st, _, data := e.do("GET", "/admin/keys?account=acme", testAdminToken, nil)
	var list struct{ Data []admin.KeyView }
	if st != 200 || json.Unmarshal(data, &list) != nil || len(list.Data) != 1 || list.Data[0].LimitUSD != "0.100000000" || list.Data[0].SpentUSD == "" {
		t.Errorf("list: %d %s", st, data)
	}
	if st, _, data := e.do("GET", "/admin/keys/key_nobody", testAdminToken, nil); st != 404 {
		t.Errorf("an unknown key: %d %s", st, data)
	}
	if st, _, data := e.do("POST", "/admin/keys/update", testAdminToken, map[string]any{"id": "key_nobody", "label": "x"}); st != 404 {
		t.Errorf("updating an unknown key: %d %s", st, data)
	}
}

// TestAdminKeySettingsInvalid: every bad setting is a 400 whose code and
// message name the field, on create and on update alike.
func TestAdminKeySettingsInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	id := adminKeyDo(t, e, "POST", "/admin/keys", map[string]any{"account": "acme", "route": "auto"}).ID
	for _, tc := range []struct {
		name  string
		set   map[string]any
		field string
		says  string
	}{
		{"limit not a number", map[string]any{"limit_usd": "five"}, "limit_usd", "limit_usd"},
		{"limit with an exponent", map[string]any{"limit_usd": json.Number("1e2")}, "limit_usd", "decimal"},
		{"limit below a nano-USD", map[string]any{"limit_usd": "1.0000000001"}, "limit_usd", "precision"},
		{"negative limit", map[string]any{"limit_usd": "-1"}, "limit_usd", "negative"},
		{"limit a boolean", map[string]any{"limit_usd": true}, "limit_usd", "limit_usd"},
		{"yearly", map[string]any{"limit_reset": "yearly"}, "limit_reset", "daily, weekly, monthly or none"},
		{"a reset not a string", map[string]any{"limit_reset": 30}, "limit_reset", "daily, weekly, monthly or none"},
		{"expires not a time", map[string]any{"expires": "tomorrow"}, "expires", "RFC 3339"},
		{"expires a number", map[string]any{"expires": 1767225600}, "expires", "RFC 3339"},
		{"expired already", map[string]any{"expires": "2020-01-01T00:00:00Z"}, "expires", "not in the future"},
		{"a network too wide", map[string]any{"allow": []string{"10.0.0.0/33"}}, "allow", "10.0.0.0/33"},
		{"allow not a list", map[string]any{"allow": "10.0.0.0/8"}, "allow", "list"},
		{"a label with a newline", map[string]any{"label": "a\nb"}, "label", "label"},
		{"a label too long", map[string]any{"label": strings.Repeat("x", 201)}, "label", "200 bytes"},
		{"a label not a string", map[string]any{"label": 5}, "label", "label"},
	} {
		for _, op := range []string{"create", "update"} {
			t.Run(tc.name+", "+op, func(t *testing.T) {
				body, path := map[string]any{"account": "acme", "route": "auto"}, "/admin/keys"
				if op == "update" {
					body, path = map[string]any{"id": id}, "/admin/keys/update"
				}
				for k, v := range tc.set {
					body[k] = v
				}
				st, _, data := e.do("POST", path, testAdminToken, body)
				if st != 400 {
					t.Fatalf("%d %s", st, data)
				}
				msg, typ, code := errBody(t, data)
				if code != "invalid_"+tc.field || typ != "invalid_request_error" || !strings.Contains(msg, tc.field) || !strings.Contains(msg, tc.says) {
					t.Errorf("code %v type %v message %q", code, typ, msg)
				}
			})
		}
	}
	for _, tc := range []struct {
		name string
		body map[string]any
		code string
	}{
		{"nothing to change", map[string]any{"id": id}, "invalid_body"},
		{"no key named", map[string]any{"label": "x"}, "invalid_id"},
		{"an unknown field", map[string]any{"id": id, "limit": "5"}, "invalid_body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, data := e.do("POST", "/admin/keys/update", testAdminToken, tc.body)
			if _, _, code := errBody(t, data); st != 400 || code != tc.code {
				t.Errorf("%d %s, want 400 %s", st, data, tc.code)
			}
		})
	}
	if v := adminKeyDo(t, e, "GET", "/admin/keys/"+id, nil); v.Label != "" || v.LimitUSD != "" || v.Expires != "" || len(v.Allow) != 0 {
		t.Errorf("a refused update changed the key: %+v", v)
	}
}

// TestAdminAccountAlert: POST /admin/accounts/A/update sets the account's
// low-balance threshold, shown on the account; relay_accounts_below_alert
// counts the accounts under theirs; bad input names the field.
func TestAdminAccountAlert(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "2")
	e.account("beta", "20")
	for acct, below := range map[string]string{"acme": "5", "beta": "5"} {
		st, _, data := e.do("POST", "/admin/accounts/"+acct+"/update", testAdminToken, map[string]any{"alert_below_usd": below})
		var a admin.AccountView
		if st != 200 || json.Unmarshal(data, &a) != nil || a.AlertBelowUSD != "5.000000000" || a.BelowAlert != (acct == "acme") {
			t.Fatalf("%s: %d %s", acct, st, data)
		}
	}
	st, _, data := e.do("GET", "/metrics", "", nil)
	if v := metricValue(t, string(data), "relay_accounts_below_alert"); st != 200 || v != 1 {
		t.Errorf("relay_accounts_below_alert = %v, want 1", v)
	}
	var a admin.AccountView
	st, _, data = e.do("GET", "/admin/accounts/acme", testAdminToken, nil)
	if st != 200 || json.Unmarshal(data, &a) != nil || a.AlertBelowUSD != "5.000000000" || !a.BelowAlert {
		t.Errorf("GET the account: %d %s", st, data)
	}
	st, _, data = e.do("POST", "/admin/accounts/acme/update", testAdminToken, map[string]any{"alert_below_usd": 0})
	a = admin.AccountView{}
	if st != 200 || json.Unmarshal(data, &a) != nil || a.AlertBelowUSD != "" || a.BelowAlert {
		t.Errorf("clearing the alert: %d %s", st, data)
	}
	for _, tc := range []struct {
		path   string
		body   map[string]any
		status int
		code   string
	}{
		{"/admin/accounts/acme/update", map[string]any{"alert_below_usd": "five"}, 400, "invalid_alert_below_usd"},
		{"/admin/accounts/acme/update", map[string]any{"alert_below_usd": "-1"}, 400, "invalid_alert_below_usd"},
		{"/admin/accounts/acme/update", map[string]any{}, 400, "invalid_body"},
		{"/admin/accounts/nobody/update", map[string]any{"alert_below_usd": "1"}, 404, "not_found"},
	} {
		st, _, data := e.do("POST", tc.path, testAdminToken, tc.body)
		if _, _, code := errBody(t, data); st != tc.status || code != tc.code {
			t.Errorf("%s %v: %d %s, want %d %s", tc.path, tc.body, st, data, tc.status, tc.code)
		}
	}
}

// TestReplicasKeyUpdate: a key's allow-list changed through A is applied
// by B and C within a second, though both had the key cached.
func TestReplicasKeyUpdate(t *testing.T) {
	// Not parallel: it bounds the update's spread at 1 s.
	a := newEnv(t, withRedis(t, redisURL(t)))
	b, c := a.replica(nil), a.replica(nil)
	a.account("acme", "100")
	key := a.key("acme", "economy")
	body := chatBody("modelf-flash", "hi", `"max_tokens":4`)
	for _, r := range []*env{a, b, c} { // each caches the key
		if code, _, data := r.do("POST", "/v1/chat/completions", key, body); code != 200 {
			t.Fatalf("status %d: %s", code, data)
		}
	}
	adminKeyDo(t, a, "POST", "/admin/keys/update", map[string]any{"key": key, "allow": []string{"192.0.2.0/24"}})
	updated := time.Now()
	for _, r := range []*env{b, c} {
		applied := testwait.Holds(time.Second-time.Since(updated), func() bool {
			code, _, _ := r.do("POST", "/v1/chat/completions", key, body)
			if code != 200 && code != 403 {
				t.Fatalf("status %d", code)
			}
			return code == 403
		})
		if !applied {
			t.Fatal("an allow-list changed on another replica is not applied after 1 s")
		}
	}
}
