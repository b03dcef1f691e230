package billing

import (
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// TestOverlapOnlyWithAmpleCredit: a hold overlaps only on PostgreSQL (unless
// billing.overlap_hold is false), for a call of a key with no spend limit whose account
// last showed overlapMargin times the hold, lately.
func TestOverlapOnlyWithAmpleCredit(t *testing.T) {
	t.Parallel()
	const minimalConfig = "admin_token: 0123456789abcdef0123\nroutes: [{name: standard}]\n" +
		"lines: [{name: a, base_url: 'http://127.0.0.1:9090', models: ['*'], route: standard}]\n"
	for _, tc := range []struct {
		yaml string
		want bool
	}{
		{"", false},
		{"store: {driver: postgres, dsn: 'postgres://x@h/db'}\n", true},
		{"store: {driver: postgres, dsn: 'postgres://x@h/db'}\nbilling: {overlap_hold: false}\n", false},
		{"billing: {overlap_hold: true}\n", false},
	} {
		c, err := config.Parse([]byte(minimalConfig + tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := overlapsHolds(c); got != tc.want {
			t.Errorf("%q: holds overlap %v, want %v", tc.yaml, got, tc.want)
		}
	}
	now := time.Now()
	s := newCreditSeen()
	hold := pricing.Nano(40_600)
	s.saw("rich", overlapMargin*hold, now)
	s.saw("short", overlapMargin*hold-1, now)
	s.saw("stale", overlapMargin*hold*10, now.Add(-overlapFresh-time.Second))
	s.saw("owing", -5, now)
	for account, want := range map[string]bool{"rich": true, "short": false, "stale": false, "owing": false, "unseen": false} {
		if got := s.ample(account, hold, now); got != want {
			t.Errorf("ample(%s) = %v, want %v", account, got, want)
		}
	}
	if !s.ample("rich", 0, now) {
		t.Error("a free call of a rich account does not overlap")
	}
	s.forget("rich")
	if s.ample("rich", hold, now) {
		t.Error("a forgotten account still overlaps")
	}
	for i := range maxCreditSeen + 1 {
		s.saw(string(rune('a'+i%26))+strings.Repeat("x", i%7)+string(rune(i)), 1, now)
	}
	if len(s.m) > maxCreditSeen {
		t.Fatalf("creditSeen holds %d accounts, more than %d", len(s.m), maxCreditSeen)
	}

	l := &Ledger{seen: newCreditSeen(), overlap: true}
	l.seen.saw("acme", 1_000_000*hold, time.Now())
	c := Call{Endpoint: pricing.EndpointChat, Key: store.Key{Account: "acme"}, Amount: hold}
	if !l.overlaps(c) {
		t.Fatal("a call of a rich account does not overlap")
	}
	c.Key.Limit = pricing.Nano(1)
	if l.overlaps(c) {
		t.Fatal("a call of a key with a spend limit overlaps")
	}
	c.Key.Limit = 0
	video := c
	video.Endpoint, video.ChargedFirst = pricing.EndpointVideo, true
	if l.overlaps(video) {
		t.Fatal("a video job overlaps")
	}
	l.overlap = false
	if l.overlaps(c) {
		t.Fatal("a call overlaps on a store that holds in memory")
	}
}
