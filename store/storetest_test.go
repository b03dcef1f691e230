package store_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/store/storetest"
)

// badgerDir is a Badger store with the directory it was opened on, so that
// the kit's Crash can reopen it.
type badgerDir struct {
	*store.Badger
	dir string
}

func openBadgerAt(t *testing.T, dir, owner string) *badgerDir {
	t.Helper()
	b, err := store.OpenBadger(dir, store.BadgerOptions{Owner: owner, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("OpenBadger(%q): %v", dir, err)
	}
	return &badgerDir{Badger: b, dir: dir}
}

// The embedded store passes the conformance kit. Its crash is a close that
// leaves the holds open (an abrupt exit leaves the same hold log), then a
// reopen under a new owner and RecoverHolds, as relay serve does at start.
func TestBadgerConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		return openBadgerAt(t, t.TempDir(), "")
	}, storetest.Options{
		Crash: func(t *testing.T, s storetest.Store) storetest.Store {
			old := s.(*badgerDir)
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			next := openBadgerAt(t, old.dir, "after-crash")
			n, err := next.RecoverHolds(context.Background())
			if err != nil {
				t.Fatalf("RecoverHolds: %v", err)
			}
			t.Logf("RecoverHolds released %d holds", n)
			return next
		},
	})
}
