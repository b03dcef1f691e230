package postgres

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/store"
)

// TestConsoleUnavailable: with the database gone, every console method
// answers ErrUnavailable, as the ledger's do (the console answers 503).
func TestConsoleUnavailable(t *testing.T) {
	dsn := freshDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := newLossyProxy(t, u.Host, "\x00never sent")
	u.Host = p.ln.Addr().String()
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	s := openStore(t, u.String(), Options{RenewEvery: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.CreateAccount(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	p.ln.Close() // no new connections
	p.cut()      // and none of the old
	now := time.Now()
	hash := store.HashKey("rls-x")
	calls := map[string]func() error{
		"IssueLogin": func() error {
			_, err := s.IssueLogin(ctx, "alice@example.com", "acme", hash, now.Add(time.Hour), now)
			return err
		},
		"Login":       func() error { _, err := s.Login(ctx, "alice@example.com"); return err },
		"SetPassword": func() error { _, err := s.SetPassword(ctx, hash, "pw", now); return err },
		"ListLogins":  func() error { _, err := s.ListLogins(ctx, "acme"); return err },
		"PutSession": func() error {
			return s.PutSession(ctx, store.Session{ID: hash, Operator: true, CSRF: "c", Expires: now.Add(time.Hour)})
		},
		"Session":       func() error { _, err := s.Session(ctx, hash); return err },
		"TouchSession":  func() error { return s.TouchSession(ctx, hash, now) },
		"DeleteSession": func() error { return s.DeleteSession(ctx, hash) },
		"PurgeSessions": func() error { _, err := s.PurgeSessions(ctx, now, now); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the database gone: %v, want ErrUnavailable", name, err)
		}
	}
}
