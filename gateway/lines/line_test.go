package lines

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

// OrderPlan spreads a tier by weight and keeps tiers in order.
func TestOrderPlan(t *testing.T) {
	plan := []abi.Step{{Line: "late", Tier: 1, Weight: 1}, {Line: "heavy", Tier: 0, Weight: 3}, {Line: "light", Tier: 0, Weight: 1}}
	counts := map[string]int{}
	seq := int64(0)
	r := func(n int64) int64 { seq++; return seq % n }
	for i := 0; i < 400; i++ {
		o := OrderPlan(plan, r)
		if len(o) != 3 || o[2] != "late" {
			t.Fatalf("order %v", o)
		}
		counts[o[0]]++
	}
	if counts["heavy"] != 300 || counts["light"] != 100 {
		t.Fatalf("first picks %v, want 3:1", counts)
	}
}

// TestLineDo: a line sends on its transport as an http.Client would, minus
// what the gateway never wants: a redirect comes back to the caller instead
// of being followed, credentials in base_url become basic auth, and an
// error names the method and URL.
func TestLineDo(t *testing.T) {
	var gotAuth, gotPath string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotPath = r.Header.Get("Authorization"), r.URL.Path
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	defer up.Close()
	l := &Line{rt: http.DefaultTransport}
	u, _ := url.Parse(up.URL)
	u.User = url.UserPassword("user", "secret")
	req, _ := http.NewRequest(http.MethodPost, u.String()+"/v1/chat/completions", strings.NewReader("{}"))
	resp, err := l.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || gotPath != "/v1/chat/completions" {
		t.Errorf("status %d after %s: the redirect was followed", resp.StatusCode, gotPath)
	}
	if want := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:secret")); gotAuth != want {
		t.Errorf("Authorization %q, want %q", gotAuth, want)
	}
	// A key the line sets wins over credentials in the URL.
	req, _ = http.NewRequest(http.MethodPost, u.String()+"/v1/chat/completions", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer k")
	if resp, err = l.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if gotAuth != "Bearer k" {
		t.Errorf("Authorization %q, want the line's key", gotAuth)
	}
	up.Close()
	req, _ = http.NewRequest(http.MethodPost, up.URL+"/v1/chat/completions", strings.NewReader("{}"))
	_, err = l.Do(req)
	var uerr *url.Error
	if !errors.As(err, &uerr) || !strings.HasPrefix(err.Error(), `Post "`+up.URL+`/v1/chat/completions": `) {
		t.Errorf("error %v, want a *url.Error naming the method and URL", err)
	}
}
