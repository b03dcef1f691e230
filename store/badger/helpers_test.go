package badger

import (
	"context"
	"log/slog"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

const usd = pricing.NanoPerUSD

// openAt opens a store in dir with the given owner and closes it when the
// test ends.
func openAt(t testing.TB, dir, owner string, sync bool) *Store {
	t.Helper()
	b, err := Open(dir, Options{SyncWrites: sync, Owner: owner, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("Open(%q): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func openTemp(t testing.TB) *Store {
	t.Helper()
	return openAt(t, t.TempDir(), "", false)
}

func credit(t testing.TB, b *Store, account string, amount pricing.Nano) {
	t.Helper()
	if _, err := b.Credit(context.Background(), account, amount, "test credit"); err != nil {
		t.Fatalf("Credit(%q, %d): %v", account, amount, err)
	}
}

func hold(t testing.TB, b *Store, account, reqID string, amount pricing.Nano) {
	t.Helper()
	if err := b.Hold(context.Background(), store.Hold{RequestID: reqID, Account: account, KeyID: "key_test",
		Model: "m", Route: "r", Endpoint: pricing.EndpointChat, Amount: amount}); err != nil {
		t.Fatalf("Hold(%q, %d): %v", reqID, amount, err)
	}
}

func balance(t testing.TB, b *Store, account string) store.Account {
	t.Helper()
	a, err := b.Balance(context.Background(), account)
	if err != nil {
		t.Fatalf("Balance(%q): %v", account, err)
	}
	return a
}

// audit fails the test unless the account's books hold.
func audit(t testing.TB, b *Store, account string) store.AuditReport {
	t.Helper()
	r, err := b.Audit(context.Background(), account)
	if err != nil {
		t.Fatalf("Audit(%q): %v", account, err)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

// tagOf returns the first byte, the layout tag, of the record stored at key.
func tagOf(t testing.TB, b *Store, key string) byte {
	t.Helper()
	var tag byte
	if err := b.db.View(func(txn *badger.Txn) error {
		return getValue(txn, []byte(key), func(v []byte) error {
			tag = v[0]
			return nil
		})
	}); err != nil {
		t.Fatalf("reading %s: %v", key, err)
	}
	return tag
}
