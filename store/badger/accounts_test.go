package badger

import (
	"context"
	"fmt"
	"github.com/modelrelay/modelrelay/store"
	"testing"
)

// TestListAccounts: accounts come in id order, a page at a time, with
// their balance and the open holds, loaded in memory or not.
func TestListAccounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b := openAt(t, dir, "", false)
	for _, id := range []string{"carol", "alice", "bob", "alice2"} {
		if _, err := b.CreateAccount(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	credit(t, b, "bob", 5*usd)
	if err := b.Hold(ctx, store.Hold{RequestID: "req_1", Account: "bob", Model: "m", Route: "r", Amount: 2 * usd}); err != nil {
		t.Fatal(err)
	}
	ids := func(as []store.Account) string {
		s := ""
		for _, a := range as {
			s += fmt.Sprintf("%s:%d/%d ", a.ID, a.Balance/usd, a.Held/usd)
		}
		return s
	}
	for _, tc := range []struct {
		after string
		limit int
		want  string
	}{
		{"", 0, "alice:0/0 alice2:0/0 bob:5/2 carol:0/0 "},
		{"", 2, "alice:0/0 alice2:0/0 "},
		{"alice2", 2, "bob:5/2 carol:0/0 "},
		{"alice", 1, "alice2:0/0 "}, // strictly after: a prefix of the next id is not the next id
		{"carol", 10, ""},
		{"zzz", 10, ""},
		{"a", store.MaxAccountPage + 5, "alice:0/0 alice2:0/0 bob:5/2 carol:0/0 "},
	} {
		got, err := b.ListAccounts(ctx, tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if ids(got) != tc.want {
			t.Errorf("after %q limit %d: %q, want %q", tc.after, tc.limit, ids(got), tc.want)
		}
	}
	for _, a := range mustList(t, b) {
		if a.Created.IsZero() {
			t.Errorf("%s: no creation time", a.ID)
		}
	}
	// Reopened, nothing is in memory: the hold, still open, is counted
	// from the hold log, and listing loads no account.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	got := mustList(t, b2)
	bal, err := b2.Balance(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[2].ID != "bob" || got[2].Balance != bal.Balance || got[2].Held != bal.Held {
		t.Errorf("after reopening: %+v, Balance says %+v", got, bal)
	}
}

func mustList(t *testing.T, b *Store) []store.Account {
	t.Helper()
	as, err := b.ListAccounts(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return as
}
