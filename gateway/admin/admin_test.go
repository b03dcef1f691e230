package admin

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/store"
)

// Key settings from the admin API never panic and fail only with a 400
// naming the field; what they accept is canonical (an allow-list
// store.CheckAllow leaves as it is, a limit of at least 0, a known reset).
func FuzzKeySettings(f *testing.F) {
	for _, s := range []string{
		`{"label":"ci","limit_usd":"5","limit_reset":"monthly","expires":"2030-01-01T00:00:00Z","allow":["10.0.0.0/8","::1"]}`,
		`{"limit_usd":0.1}`, `{"limit_usd":1e2}`, `{"limit_usd":"-1"}`, `{"limit_usd":null,"expires":null,"allow":null,"label":null}`,
		`{"limit_reset":"none","expires":"none","allow":[]}`, `{"allow":["10.0.0.0/33"]}`, `{"label":"a\nb"}`, `{"expires":5}`,
	} {
		f.Add([]byte(s))
	}
	now := time.Date(2027, 3, 10, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte) {
		var s keySettings
		if json.Unmarshal(body, &s) != nil {
			return
		}
		u, err := s.update(now)
		if err != nil {
			e, ok := err.(*apierr.Error)
			if !ok || e.Status != 400 || !strings.HasPrefix(fmt.Sprint(e.Code), "invalid_") {
				t.Fatalf("%s: %v is not a 400 naming a field", body, err)
			}
			return
		}
		if u.Limit != nil && *u.Limit < 0 {
			t.Fatalf("%s: limit %d", body, *u.Limit)
		}
		if u.Reset != nil && store.CheckReset(*u.Reset) != nil {
			t.Fatalf("%s: reset %q", body, *u.Reset)
		}
		if u.Allow != nil {
			if again, err := store.CheckAllow(*u.Allow); err != nil || !slices.Equal(again, *u.Allow) {
				t.Fatalf("%s: allow %q is not canonical", body, *u.Allow)
			}
		}
		if u.Expires != nil && !u.Expires.IsZero() && !u.Expires.After(now) {
			t.Fatalf("%s: expires %v", body, *u.Expires)
		}
	})
}

// The link's base is console.public_url when set, else the address the
// request came to: https only over TLS, whatever X-Forwarded-Proto says.
func TestSetupLink(t *testing.T) {
	t.Parallel()
	plain := httptest.NewRequest("POST", "http://relay.internal:8080/admin/accounts/acme/login", nil)
	plain.Header.Set("X-Forwarded-Proto", "https")
	secure := httptest.NewRequest("POST", "https://relay.example.com/admin/accounts/acme/login", nil)
	secure.TLS = &tls.ConnectionState{}
	noHost := httptest.NewRequest("POST", "/admin/accounts/acme/login", nil)
	noHost.Host = ""
	for _, c := range []struct {
		name, public string
		r            *http.Request
		want         string
	}{
		{"public url", "https://relay.example.com/", plain, "https://relay.example.com/console/setup/rls-x"},
		{"public url with a path", "https://example.com/relay", plain, "https://example.com/relay/console/setup/rls-x"},
		{"plain request", "", plain, "http://relay.internal:8080/console/setup/rls-x"},
		{"TLS request", "", secure, "https://relay.example.com/console/setup/rls-x"},
		{"no host", "", noHost, "/console/setup/rls-x"},
	} {
		if got := setupLink(c.public, c.r, "rls-x"); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
