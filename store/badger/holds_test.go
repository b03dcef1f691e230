package badger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/modelrelay/modelrelay/store"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
)

// Holds are taken in memory, yet many concurrent holds on one account
// never reserve more than the balance: exactly ⌊balance / amount⌋ of them
// succeed and every other one is refused as insufficient.
func TestHoldsNeverOverReserve(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		sync    bool
		balance pricing.Nano
		amount  pricing.Nano
		callers int
	}{
		{"not a multiple", false, 1_000_003, 10_000, 400},
		{"exact multiple, fsync", true, 64 * usd, 1 * usd, 200},
		{"one fits", false, 999, 999, 100},
		{"none fits", false, 998, 999, 50},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			b := openAt(t, t.TempDir(), "", tc.sync)
			credit(t, b, "acme", tc.balance)
			var (
				wg       sync.WaitGroup
				start    = make(chan struct{})
				admitted = make(chan string, tc.callers)
				refused  atomic.Int64
			)
			for i := range tc.callers {
				wg.Go(func() {
					<-start
					id := fmt.Sprintf("req_%04d", i)
					err := b.Hold(ctx, store.Hold{RequestID: id, Account: "acme", Amount: tc.amount})
					switch {
					case err == nil:
						admitted <- id
					case errors.Is(err, store.ErrInsufficient):
						refused.Add(1)
					default:
						t.Errorf("Hold %s: %v", id, err)
					}
				})
			}
			close(start)
			wg.Wait()
			close(admitted)
			want := int(tc.balance / tc.amount)
			if len(admitted) != want || refused.Load() != int64(tc.callers-want) {
				t.Fatalf("%d admitted, %d refused; want %d and %d", len(admitted), refused.Load(), want, tc.callers-want)
			}
			a := balance(t, b, "acme")
			if a.Held != pricing.Nano(want)*tc.amount || a.Held > a.Balance {
				t.Fatalf("account %+v: held must be %d and at most the balance", a, pricing.Nano(want)*tc.amount)
			}
			for id := range admitted {
				wg.Go(func() {
					if _, err := b.Settle(ctx, store.Settlement{RequestID: id, Account: "acme", Charge: tc.amount / 2}); err != nil {
						t.Errorf("Settle %s: %v", id, err)
					}
				})
			}
			wg.Wait()
			r := audit(t, b, "acme")
			if r.Account.Held != 0 || r.Account.Balance != tc.balance-pricing.Nano(want)*(tc.amount/2) {
				t.Errorf("after settling: %+v", r.Account)
			}
		})
	}
}

// A Settle or Release right after its Hold, in the same goroutine, finds
// the hold, and the account ends as the charges say.
func TestHoldThenSettleAtOnce(t *testing.T) {
	t.Parallel()
	for _, fsync := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", fsync), func(t *testing.T) {
			ctx := context.Background()
			b := openAt(t, t.TempDir(), "", fsync)
			credit(t, b, "acme", usd)
			const callers, each = 8, 50
			var wg sync.WaitGroup
			for c := range callers {
				wg.Go(func() {
					for i := range each {
						id := fmt.Sprintf("req_%d_%d", c, i)
						if err := b.Hold(ctx, store.Hold{RequestID: id, Account: "acme", Amount: 1000}); err != nil {
							t.Errorf("Hold %s: %v", id, err)
							return
						}
						if _, err := b.Settle(ctx, store.Settlement{RequestID: id, Account: "acme", Charge: 7}); err != nil {
							t.Errorf("Settle %s right after its Hold: %v", id, err)
							return
						}
						if i%2 == 0 { // and a Release, which looks the account up
							rid := id + "_r"
							if err := b.Hold(ctx, store.Hold{RequestID: rid, Account: "acme", Amount: 1000}); err != nil {
								t.Errorf("Hold %s: %v", rid, err)
								return
							}
							if err := b.Release(ctx, rid, "failed"); err != nil {
								t.Errorf("Release %s right after its Hold: %v", rid, err)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			r := audit(t, b, "acme")
			if r.Account.Balance != usd-callers*each*7 || r.Account.Held != 0 {
				t.Errorf("account %+v", r.Account)
			}
		})
	}
}

// openLogged opens a store in dir whose log the test reads; it is closed
// when the test ends.
func openLogged(t *testing.T, dir, owner string) (*Store, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	b, err := Open(dir, Options{Owner: owner, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, logs
}

// syncBuffer is a log destination for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// segments lists the hold log's segment files in dir.
func segments(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, holdLogDir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// A hold that cannot be written to the hold log is refused, naming the
// request and the cause, and holds nothing; the holds before it stay open,
// and the log works again once the cause is gone.
func TestHoldLogWriteFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b := openAt(t, dir, "", false)
	b.holdLog.segmentMax = 1 // every hold starts a segment
	credit(t, b, "acme", usd)
	hold(t, b, "acme", "req_1", 1000)
	logDir := filepath.Join(dir, holdLogDir)
	if err := os.Rename(logDir, logDir+".away"); err != nil { // the disk goes away
		t.Fatal(err)
	}
	err := b.Hold(ctx, store.Hold{RequestID: "req_lost", Account: "acme", Amount: 1000})
	if err == nil || !strings.Contains(err.Error(), `"req_lost"`) || !strings.Contains(err.Error(), "hold log") || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Hold with a failing log: %v, want an error naming the request and wrapping the cause", err)
	}
	if a := balance(t, b, "acme"); a.Held != 1000 {
		t.Errorf("held %d after a refused hold, want 1000 (req_1's)", a.Held)
	}
	if _, err := b.Settle(ctx, store.Settlement{RequestID: "req_lost", Account: "acme", Charge: 1}); !errors.Is(err, store.ErrNoHold) {
		t.Errorf("Settle of the refused hold: %v, want ErrNoHold", err)
	}
	if err := os.Rename(logDir+".away", logDir); err != nil {
		t.Fatal(err)
	}
	// A file left where the next segment goes fails one hold, not all.
	next := filepath.Join(logDir, segmentName(b.holdLog.seg+1))
	if err := os.WriteFile(next, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.Hold(ctx, store.Hold{RequestID: "req_blocked", Account: "acme", Amount: 1000}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Hold onto a leftover segment file: %v, want ErrExist", err)
	}
	hold(t, b, "acme", "req_2", 1000) // with the leftover still there
	os.Remove(next)
	if got := segments(t, dir); len(got) != 2 {
		t.Errorf("segments %v: want req_1's and req_2's", got)
	}
	for _, id := range []string{"req_1", "req_2"} {
		if _, err := b.Settle(ctx, store.Settlement{RequestID: id, Account: "acme", Charge: 10}); err != nil {
			t.Errorf("Settle %s: %v", id, err)
		}
	}
	if got := segments(t, dir); len(got) != 1 {
		t.Errorf("segments %v: want only the current one once req_1 has ended", got)
	}
	if a := audit(t, b, "acme").Account; a.Held != 0 || a.Balance != usd-20 {
		t.Errorf("account %+v", a)
	}
}

// The holds open when a process ends are in its hold log: the next process
// releases each with a recovery entry, and only those. Close refuses new
// holds and waits for the one being written, so every Hold that returned
// nil is recovered.
func TestHoldsSurviveTheProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := Open(dir, Options{SyncWrites: true, Owner: "first", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	credit(t, b, "acme", usd)
	held, sum := holdUntilClosed(t, b)

	again := openAt(t, dir, "second", false)
	before := balance(t, again, "acme")
	hold(t, again, "acme", "req_mine", 5) // taken before recovery: never touched
	n, err := again.RecoverHolds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if int64(n) != held {
		t.Errorf("recovered %d holds, %d were open", n, held)
	}
	checkRecoveryEntries(t, again, "first", held, sum)
	a := audit(t, again, "acme").Account
	if a.Balance != before.Balance || a.Held != 5 {
		t.Errorf("after recovery %+v; before %+v: recovery moves no money, and req_mine holds 5", a, before)
	}
	if got := segments(t, dir); len(got) != 1 {
		t.Errorf("segments after recovery %v: want only this process's", got)
	}
	if n, err := again.RecoverHolds(ctx); err != nil || n != 0 {
		t.Errorf("second RecoverHolds: %d, %v", n, err)
	}
	if _, err := again.Settle(ctx, store.Settlement{RequestID: "req_mine", Account: "acme", Charge: 5}); err != nil {
		t.Errorf("this process's hold after recovery: %v", err)
	}
}

// holdUntilClosed has eight goroutines hold against acme (settling every
// third hold at once) until Close, which it calls once each has held ten
// times, and returns how many holds, for how much, were open when the
// store closed. A Hold refused for any reason but errClosed, during Close or
// after it, fails the test.
func holdUntilClosed(t *testing.T, b *Store) (held, sum int64) {
	t.Helper()
	ctx := context.Background()
	var (
		wg        sync.WaitGroup
		heldN     atomic.Int64
		heldSum   atomic.Int64
		ran       = make(chan struct{}, 8)
		stillOpen = func(amount int64) { heldN.Add(1); heldSum.Add(amount) }
	)
	for c := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				amount := int64(1 + i%7)
				id := fmt.Sprintf("req_%d_%d", c, i)
				err := b.Hold(ctx, store.Hold{RequestID: id, Account: "acme", Amount: pricing.Nano(amount)})
				if err != nil {
					if !errors.Is(err, errClosed) {
						t.Errorf("Hold while closing: %v, want errClosed", err)
					}
					return
				}
				if i%3 == 0 { // ended before the process: not recovered
					if _, err := b.Settle(ctx, store.Settlement{RequestID: id, Account: "acme", Charge: 1}); err == nil {
						continue
					}
					stillOpen(amount) // closed meanwhile: the hold stays open
					return
				}
				stillOpen(amount)
				if i == 10 {
					ran <- struct{}{}
				}
			}
		})
	}
	for range 8 {
		<-ran
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := b.Hold(ctx, store.Hold{RequestID: "req_after", Account: "acme", Amount: 1}); !errors.Is(err, errClosed) {
		t.Errorf("Hold after Close: %v, want errClosed", err)
	}
	return heldN.Load(), heldSum.Load()
}

// checkRecoveryEntries wants acme's journal to hold one recovery entry, of
// owner's note and no money, per hold that was open: held of them, for sum.
func checkRecoveryEntries(t *testing.T, b *Store, owner string, held, sum int64) {
	t.Helper()
	entries, err := b.Charges(context.Background(), "acme", 100_000)
	if err != nil {
		t.Fatal(err)
	}
	var recovered, recoveredSum int64
	for _, e := range entries {
		if e.Kind == store.KindRecovery {
			recovered++
			recoveredSum += int64(e.HoldAmount)
			if e.Note != store.RecoveryNote(owner) || e.Amount != 0 {
				t.Errorf("recovery entry %+v", e)
			}
		}
	}
	if recovered != held || recoveredSum != sum {
		t.Errorf("%d recovery entries for %d nano-USD; the open holds were %d for %d", recovered, recoveredSum, held, sum)
	}
}

// The log starts a new segment past its size limit and deletes a segment
// once it is no longer written to and every hold in it has ended.
func TestHoldLogSegments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b := openAt(t, dir, "", false)
	b.holdLog.segmentMax = 200 // two holds (90 bytes a frame) a segment
	credit(t, b, "acme", usd)
	for i := range 20 {
		hold(t, b, "acme", fmt.Sprintf("req_%02d", i), 1)
	}
	all := segments(t, dir)
	if len(all) != 10 {
		t.Fatalf("20 holds in %d segments %v, want 10", len(all), all)
	}
	// End every hold but one in the first segment and one in the last.
	for i := 1; i < 19; i++ {
		if _, err := b.Settle(ctx, store.Settlement{RequestID: fmt.Sprintf("req_%02d", i), Account: "acme", Charge: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if got := segments(t, dir); len(got) != 2 || got[0] != all[0] || got[1] != all[len(all)-1] {
		t.Errorf("segments %v, want the first and the last of %v", got, all)
	}
	if err := b.Release(ctx, "req_00", "failed"); err != nil {
		t.Fatal(err)
	}
	if got := segments(t, dir); len(got) != 1 || got[0] != all[len(all)-1] {
		t.Errorf("segments %v, want only the last (still written to) of %v", got, all)
	}
	if _, err := b.Settle(ctx, store.Settlement{RequestID: "req_19", Account: "acme", Charge: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := segments(t, dir); len(got) != 0 {
		t.Errorf("segments %v after Close with no hold open", got)
	}
}

// A segment whose last frame was torn (by a crash of the machine: its last
// bytes are still zeros) yields the holds before the tear, and the tear is
// logged; a frame that fails its checksum ends the segment the same way.
func TestHoldLogDamage(t *testing.T) {
	t.Parallel()
	for damage, want := range map[string]string{
		"zeroed":   "fails its checksum", // its last bytes never reached the disk (a mapped segment)
		"cut":      "is cut short",       // the file ends inside it (a segment written with write(2))
		"checksum": "fails its checksum",
	} {
		t.Run(damage, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			first := openAt(t, dir, "first", false)
			credit(t, first, "acme", usd)
			hold(t, first, "acme", "req_kept", 7)
			hold(t, first, "acme", "req_torn", 11)
			seg := filepath.Join(dir, holdLogDir, segments(t, dir)[0])
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			// The second frame: after the first one's length, record and
			// checksum.
			n, w := binary.Uvarint(data)
			second := w + int(n) + 4
			n2, w2 := binary.Uvarint(data[second:])
			end := second + w2 + int(n2) + 4
			switch damage {
			case "zeroed":
				clear(data[end-3 : end])
			case "cut":
				data = data[:end-3]
			default:
				data[second+w2+5] ^= 0xff
			}
			if err := os.WriteFile(seg, data, 0o600); err != nil {
				t.Fatal(err)
			}
			b, logs := openLogged(t, dir, "second")
			if n, err := b.RecoverHolds(ctx); err != nil || n != 1 {
				t.Fatalf("RecoverHolds = %d, %v; want req_kept", n, err)
			}
			if o, err := b.Outcome(ctx, "req_kept"); err != nil || o.State != store.OutcomeRecovered || o.HoldAmount != 7 {
				t.Errorf("req_kept: %+v, %v", o, err)
			}
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "frame at byte") || !strings.Contains(logs.String(), want) {
				t.Errorf("the damage was not logged:\n%s", logs.String())
			}
			audit(t, b, "acme")
		})
	}
}

// Hold does not read the ledger, so it admits a request id that has already
// ended; the hold's Settle finds the outcome, refuses it with ErrExists and
// drops it, and the ended call's records are untouched.
func TestHoldOnEndedRequestID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openTemp(t)
	credit(t, b, "acme", usd)
	hold(t, b, "acme", "r", 100)
	if _, err := b.Settle(ctx, store.Settlement{RequestID: "r", Charge: 40}); err != nil {
		t.Fatal(err)
	}
	for _, end := range []string{"settle", "release"} {
		hold(t, b, "acme", "r", 100)
		var err error
		if end == "settle" {
			_, err = b.Settle(ctx, store.Settlement{RequestID: "r", Account: "acme", Charge: 99})
		} else {
			err = b.Release(ctx, "r", "failed")
		}
		if !errors.Is(err, store.ErrExists) {
			t.Errorf("%s of a hold on an ended id: %v, want ErrExists", end, err)
		}
		if o, err := b.Outcome(ctx, "r"); err != nil || o.State != store.OutcomeSettled || o.Charge != 40 {
			t.Errorf("outcome after the %s: %+v, %v", end, o, err)
		}
	}
	r := audit(t, b, "acme")
	if r.Account.Balance != usd-40 || r.Account.Held != 0 || r.Entries != 2 {
		t.Errorf("after the refused holds: %+v", r)
	}
}

// A frame whose hold was refused after it was written (its fsync failed) is
// taken back: nothing of it is read, and the next frame follows the one
// before it.
func TestSegmentUnwrite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), segmentName(1))
	seg, err := createSegment(path, 4096)
	if err != nil {
		t.Fatal(err)
	}
	frame := func(id string) []byte {
		rec, err := (&holdRec{RequestID: id, Account: "acme", Amount: 5}).encode(holdKey(id))
		if err != nil {
			t.Fatal(err)
		}
		return appendFrame(nil, rec)
	}
	for _, id := range []string{"req_1", "req_refused", "req_2"} {
		start := seg.off
		if err := seg.write(frame(id)); err != nil {
			t.Fatal(err)
		}
		if id == "req_refused" {
			seg.unwrite(start, seg.off-start)
		}
	}
	seg.close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	holds, problem := readSegment(path, data)
	if problem != "" || len(holds) != 2 || holds[0].RequestID != "req_1" || holds[1].RequestID != "req_2" {
		t.Errorf("read back %+v (%q), want req_1 and req_2", holds, problem)
	}
}

// A logged hold whose account does not exist (a crash of the machine kept
// the log and lost the account's commit) is logged and skipped: it must not
// stop the start.
func TestRecoverHoldOfUnknownAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	first := openAt(t, dir, "first", false)
	credit(t, first, "acme", usd)
	hold(t, first, "acme", "req_ok", 3)
	rec, err := (&holdRec{RequestID: "req_orphan", Account: "gone", Amount: 9, Owner: "first"}).encode(holdKey("req_orphan"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.holdLog.append(rec); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	b, logs := openLogged(t, dir, "second")
	if n, err := b.RecoverHolds(ctx); err != nil || n != 1 {
		t.Fatalf("RecoverHolds = %d, %v; want req_ok, and no error", n, err)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "request_id=req_orphan") {
		t.Errorf("the skipped hold was not logged:\n%s", logs.String())
	}
	if got := segments(t, dir); len(got) != 0 {
		t.Errorf("segments after recovery: %v", got)
	}
}
