package badger_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/store/badger"
	"github.com/modelrelay/modelrelay/store/storetest"
)

// badgerDir is a Badger store with the directory it was opened on, so that
// the kit's Crash can reopen it.
type badgerDir struct {
	*badger.Store
	dir string
}

func openBadgerAt(t *testing.T, dir, owner string) *badgerDir {
	t.Helper()
	b, err := badger.Open(dir, badger.Options{Owner: owner, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("OpenBadger(%q): %v", dir, err)
	}
	return &badgerDir{Store: b, dir: dir}
}

// The embedded store passes the conformance kit. Its crash is a close that
// leaves the holds open (an abrupt exit leaves the same hold log), then a
// reopen under a new owner and RecoverHolds, as relay serve does at start.
func TestBadgerConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		return openBadgerAt(t, t.TempDir(), "")
	}, storetest.Options{
		Claims: []storetest.Capability{storetest.Exporter},
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

// broken is a Badger store with one behaviour of the contract broken, for
// TestConformanceKitFails.
type broken struct {
	*badgerDir
	fault string
}

func (b *broken) Hold(ctx context.Context, h store.Hold) error {
	err := b.badgerDir.Hold(ctx, h)
	if b.fault == "over-admit" && errors.Is(err, store.ErrInsufficient) {
		return nil // admits what the credit cannot cover
	}
	return err
}

func (b *broken) Settle(ctx context.Context, s store.Settlement) (store.Entry, error) {
	e, err := b.badgerDir.Settle(ctx, s)
	if b.fault == "settle-twice" && errors.Is(err, store.ErrAlreadySettled) {
		return e, nil // says a replayed settle succeeded
	}
	return e, err
}

func (b *broken) Charges(ctx context.Context, account string, limit int) ([]store.Entry, error) {
	entries, err := b.badgerDir.Charges(ctx, account, limit)
	if b.fault == "oldest-first" {
		slices.Reverse(entries)
	}
	return entries, err
}

func (b *broken) RefundJob(ctx context.Context, requestID, reason string) (bool, error) {
	ok, err := b.badgerDir.RefundJob(ctx, requestID, reason)
	if b.fault == "refund-always" && err == nil {
		return true, nil
	}
	return ok, err
}

func (b *broken) SetPassword(ctx context.Context, setupHash, passwordHash string, now time.Time) (store.Login, error) {
	l, err := b.badgerDir.SetPassword(ctx, setupHash, passwordHash, now)
	if b.fault == "token-reuse" && err == nil { // the used token stays usable
		_, err = b.badgerDir.IssueLogin(ctx, l.Email, l.Account, setupHash, now.Add(time.Hour), now)
	}
	return l, err
}

// TestBrokenStore runs the kit on a store with the fault named by
// STORETEST_FAULT; TestConformanceKitFails runs it in a child process.
func TestBrokenStore(t *testing.T) {
	fault := os.Getenv("STORETEST_FAULT")
	if fault == "" {
		t.Skip("run by TestConformanceKitFails")
	}
	claims := []storetest.Capability{storetest.Exporter}
	switch fault {
	case "claims-allotter": // claims what it is not
		claims = append(claims, storetest.Allotter)
	case "unclaimed-export": // is what it does not claim
		claims = nil
	}
	storetest.Run(t, func(t *testing.T) storetest.Store {
		return &broken{openBadgerAt(t, t.TempDir(), ""), fault}
	}, storetest.Options{
		Claims: claims,
		Crash: func(t *testing.T, s storetest.Store) storetest.Store {
			old := s.(*broken)
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			next := openBadgerAt(t, old.dir, "after-crash")
			if fault != "no-recovery" {
				if _, err := next.RecoverHolds(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			return &broken{next, fault}
		},
	})
}

// The kit can fail: each broken store fails the subtests that check what
// it breaks.
func TestConformanceKitFails(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the kit in child processes")
	}
	cases := []struct {
		fault    string
		subtests string // a -run pattern under TestBrokenStore
		want     []string
	}{
		{"over-admit", "Insufficient|ConcurrentHolds", []string{"Insufficient", "ConcurrentHolds"}},
		{"settle-twice", "SettleOnce|ConcurrentSettle", []string{"SettleOnce", "ConcurrentSettle"}},
		{"oldest-first", "Journal", []string{"Journal"}},
		{"refund-always", "RefundJobOnce", []string{"RefundJobOnce"}},
		{"no-recovery", "Recovery", []string{"Recovery"}},
		{"token-reuse", "Console", []string{"Console"}},
		{"claims-allotter", "Capabilities|Allotments", []string{"Capabilities", "Allotments"}},
		{"unclaimed-export", "Capabilities", []string{"Capabilities"}},
	}
	for _, tc := range cases {
		t.Run(tc.fault, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenStore$/^("+tc.subtests+")$", "-test.count=1")
			cmd.Env = append(os.Environ(), "STORETEST_FAULT="+tc.fault)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the kit on a store that %s: %v, want a failing run\n%s", tc.fault, err, out)
			}
			for _, name := range tc.want {
				if !strings.Contains(string(out), "--- FAIL: TestBrokenStore/"+name+" ") {
					t.Errorf("the kit on a store that %s did not fail %s:\n%s", tc.fault, name, out)
				}
			}
		})
	}
}
