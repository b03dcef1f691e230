package badger

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"github.com/modelrelay/modelrelay/store"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
)

// record is what every on-disk record type implements.
type record interface {
	encode(key []byte) ([]byte, error)
	decode(key, val []byte) error
}

// newRecord returns an empty record of the same type as r.
func newRecord(r record) record {
	return reflect.New(reflect.TypeOf(r).Elem()).Interface().(record)
}

// allRecords returns one empty record of every type, for decoding into.
func allRecords() []record {
	return []record{&accountRec{}, &keyRec{}, &holdRec{}, &entryRec{}, &jobRec{}, &outcomeRec{}, &spendRec{}, &loginRec{}, &sessionRec{}}
}

var (
	t0      = time.Date(2026, 11, 21, 18, 34, 8, 278710818, time.UTC)
	usage   = usageRec{Input: 1000, CacheRead: 50, CacheWrite: 7, CacheWrite1h: 3, Output: 200, Images: 2, SizeTier: "1K", Seconds: 5, Resolution: "480p", Requests: 1}
	samples = []struct {
		name string
		key  string
		rec  record
	}{
		{"account", "acct/acme", &accountRec{ID: "acme", Balance: 9_350_000_000, Held: 2 * int64(usd), Seq: 3, Created: t0, AlertBelow: 5 * int64(usd)}},
		{"account overdrawn", "acct/x", &accountRec{ID: "x", Balance: math.MinInt64, Held: math.MaxInt64, Seq: math.MaxUint64, Created: maxRecordTime.UTC()}},
		{"account empty", "acct/", &accountRec{}},
		{"key", "key/h", &keyRec{ID: "key_1", Hash: store.HashKey("sk-x"), Account: "acme", Route: store.AutoRoute, Exclude: []string{"gpt-x", "", "é"}, Revoked: true, Created: t0}},
		{"key with settings", "key/h", &keyRec{ID: "key_2", Hash: store.HashKey("sk-y"), Account: "acme", Route: "cheap", Created: t0,
			Label: "ci ✓", Limit: 5 * int64(usd), Reset: store.ResetMonthly, Expires: t0.AddDate(1, 0, 0), Allow: []string{"10.0.0.0/8", "::1/128"}}},
		{"key spend", "spend/key_2", &spendRec{Spent: math.MaxInt64, PeriodStart: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}},
		{"key spend empty", "spend/", &spendRec{}},
		{"key empty", "key/", &keyRec{}},
		{"hold", "hold/req_1", &holdRec{RequestID: "req_1", Account: "acme", KeyID: "key_1", Model: "gpt-demo", Route: "auto", Endpoint: pricing.EndpointChat, Amount: 2_000_000, Created: t0, Owner: "boot-1"}},
		{"hold empty", "hold/", &holdRec{}},
		{"entry", "jrnl/acme/x", &entryRec{Seq: 7, Kind: store.KindCharge, RequestID: "req_1", Account: "acme", KeyID: "key_1", Model: "m", Route: "r", Endpoint: pricing.EndpointChat, Usage: usage, HoldAmount: 2_000_000, Amount: -1_234_567, BalanceAfter: -5, Time: t0, Note: "estimated: stream cut after 5 chunks ✂"}},
		{"entry negative usage", "jrnl/acme/y", &entryRec{Usage: usageRec{Input: -1, Requests: math.MinInt64}, Time: minRecordTime.UTC()}},
		{"entry empty", "jrnl/", &entryRec{}},
		{"job", "job/vid_1", &jobRec{RequestID: "vid_1", Account: "acme", KeyID: "key_1", Model: "video", Route: "r", Line: "480p", Amount: 300_000_000, Refunded: true, Created: t0}},
		{"job empty", "job/", &jobRec{}},
		{"outcome", "done/req_1", &outcomeRec{RequestID: "req_1", Account: "acme", State: store.OutcomeReleased, HoldAmount: 2_000_000, Seq: 7, Owner: "boot-1", Reason: "note", Time: t0,
			KeyID: "key_1", Model: "gpt-demo", Route: "auto", Endpoint: pricing.EndpointChat}},
		{"outcome settled", "done/req_1", &outcomeRec{RequestID: "req_1", Account: "acme", State: store.OutcomeSettled, Charge: 1_234_567, Seq: 7, Time: t0, compact: true}},
		{"outcome settled empty", "done/", &outcomeRec{State: store.OutcomeSettled, compact: true}},
		{"outcome empty", "done/", &outcomeRec{}},
		{"login", "login/alice@example.com", &loginRec{Email: "alice@example.com", Account: "acme", PasswordHash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA",
			SetupHash: store.HashKey("rls-x"), SetupExpires: t0.Add(24 * time.Hour), Created: t0, Updated: t0}},
		{"login empty", "login/", &loginRec{}},
		{"session", "sess/h", &sessionRec{ID: store.HashKey("cookie"), Email: "alice@example.com", Account: "acme", CSRF: "c",
			Created: t0, Seen: t0, Expires: t0.Add(12 * time.Hour)}},
		{"session of the operator", "sess/h", &sessionRec{ID: store.HashKey("cookie 2"), Operator: true, CSRF: "c", Created: t0, Seen: t0, Expires: t0}},
		{"session empty", "sess/", &sessionRec{}},
	}
)

// Every record reads back exactly as written, in one slice of exactly its
// size, and is refused as any other type of record.
func TestRecordRoundTrip(t *testing.T) {
	for _, tc := range samples {
		t.Run(tc.name, func(t *testing.T) {
			key := []byte(tc.key)
			val, err := tc.rec.encode(key)
			if err != nil {
				t.Fatal(err)
			}
			if len(val) != cap(val) {
				t.Errorf("encoded into %d of a slice of %d: the size pass and the write pass disagree", len(val), cap(val))
			}
			got := newRecord(tc.rec)
			if err := got.decode(key, val); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.rec) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, tc.rec)
			}
			for _, other := range allRecords() {
				if reflect.TypeOf(other) == reflect.TypeOf(tc.rec) {
					continue
				}
				if err := other.decode(key, val); err == nil || !strings.Contains(err.Error(), "want ") {
					t.Errorf("%T read a %T record: %v", other, tc.rec, err)
				}
			}
		})
	}
}

// Encoding a record allocates its value and nothing else; decoding one
// allocates one string for all of its string fields.
func TestRecordAllocations(t *testing.T) {
	h := &holdRec{RequestID: "req_1", Account: "acme", KeyID: "key_1", Model: "m", Route: "r", Endpoint: "chat", Amount: 5, Created: t0, Owner: "o"}
	key := holdKey(h.RequestID)
	val, err := h.encode(key)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = h.encode(key) }); n != 1 {
		t.Errorf("encode: %v allocations, want 1", n)
	}
	var got holdRec
	if n := testing.AllocsPerRun(100, func() { _ = got.decode(key, val) }); n != 1 {
		t.Errorf("decode: %v allocations, want 1", n)
	}
}

// Records as the build before key limits wrote them (account v1, key v1,
// and outcome v1, in which that build wrote every released call), byte for
// byte: each reads as it was, with the fields that came later zero, and is
// written back in its newest layout, which reads back the same.
var beforeKeyLimits = []struct {
	name, key, hex string
	want           record
	tag            byte // the layout it is written back in
}{
	{"account v1", "acct/acme", "010461636d6580b6edd445000318ea232629de0a22",
		&accountRec{ID: "acme", Balance: 9_350_000_000, Seq: 3, Created: t0}, tagAccountV2},
	{"key v1", "key/ab", "02056b65795f310261620461636d65046175746f01056770742d780118ea232629de0a22",
		&keyRec{ID: "key_1", Hash: "ab", Account: "acme", Route: "auto", Exclude: []string{"gpt-x"}, Revoked: true, Created: t0}, tagKeyV2},
	{"released outcome v1", "done/req_1", "06057265715f310461636d650872656c65617365648092f401000006626f6f742d310c757073747265616d2035303018ea232629de0a22",
		&outcomeRec{RequestID: "req_1", Account: "acme", State: store.OutcomeReleased, HoldAmount: 2_000_000, Owner: "boot-1", Reason: "upstream 500", Time: t0}, tagOutcomeV3},
}

func TestRecordsBeforeKeyLimits(t *testing.T) {
	for _, tc := range beforeKeyLimits {
		t.Run(tc.name, func(t *testing.T) {
			key := []byte(tc.key)
			val, err := hex.DecodeString(tc.hex)
			if err != nil {
				t.Fatal(err)
			}
			got := newRecord(tc.want)
			if err := got.decode(key, val); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("read:\n got %+v\nwant %+v", got, tc.want)
			}
			again, err := got.encode(key)
			if err != nil || again[0] != tc.tag {
				t.Fatalf("written back as %x, %v; want tag 0x%02x", again, err, tc.tag)
			}
			back := newRecord(tc.want)
			if err := back.decode(key, again); err != nil || !reflect.DeepEqual(back, tc.want) {
				t.Errorf("written back, read as %+v, %v", back, err)
			}
		})
	}
}

// Damaged records are refused with an error that names the key and, for a
// binary record, the field at fault.
func TestRecordDecodeErrors(t *testing.T) {
	good, err := (&accountRec{ID: "acme", Balance: 5, Created: t0}).encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	hold, err := (&holdRec{RequestID: "r"}).encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	acme := []byte{4, 'a', 'c', 'm', 'e'}
	cases := []struct {
		name string
		rec  record
		val  []byte
		want string
	}{
		{"empty", &accountRec{}, nil, "empty record"},
		{"another record", &accountRec{}, hold, "record is hold v1, want account v2 or account v1"},
		{"unknown tag", &accountRec{}, []byte{0x7f, 0}, "record is unknown tag 0x7f, want account v2 or account v1"},
		{"truncated", &accountRec{}, good[:len(good)-1], "alert_below: truncated varint"},
		{"truncated v1", &accountRec{}, cat([]byte{tagAccountV1}, acme, []byte{0, 0, 0}, make([]byte, 7)), "created: truncated time"},
		{"v1 with a v2 field", &accountRec{}, cat([]byte{tagAccountV1}, acme, []byte{0, 0, 0}, make([]byte, 8), []byte{0}), "1 bytes after the last field"},
		{"trailing bytes", &accountRec{}, cat(good, []byte{0}), "1 bytes after the last field"},
		{"string past the end", &accountRec{}, []byte{tagAccountV1, 16, 'a', 'b'}, "id: string of 16 bytes, 2 left"},
		{"varint not shortest", &accountRec{}, cat([]byte{tagAccountV1}, acme, []byte{0x80, 0x00}), "balance: varint not in its shortest form"},
		{"varint overflow", &accountRec{}, cat([]byte{tagAccountV1}, acme, bytes.Repeat([]byte{0xff}, 10), []byte{1}), "balance: varint overflows 64 bits"},
		{"varint truncated", &accountRec{}, cat([]byte{tagAccountV1}, acme, []byte{0x80}), "balance: truncated varint"},
		{"bool not 0 or 1", &keyRec{}, cat([]byte{tagKeyV1, 1, 'k', 0, 0, 0, 0, 2}, make([]byte, 8)), "revoked: bool byte 0x02"},
		{"exclude longer than the record", &keyRec{}, []byte{tagKeyV1, 0, 0, 0, 0, 100, 0}, "exclude: list of 100, 1 bytes left"},
		{"allow longer than the record", &keyRec{}, cat([]byte{tagKeyV2, 0, 0, 0, 0, 0, 0}, make([]byte, 8), []byte{0, 0, 0}, make([]byte, 8), []byte{50, 0}),
			"allow: list of 50, 1 bytes left"},
		{"broken JSON", &accountRec{}, []byte(`{"id":`), "unexpected end of JSON input"},
		{"JSON of the wrong shape", &accountRec{}, []byte(`{"balance":"lots"}`), "cannot unmarshal string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rec.decode([]byte("acct/acme"), tc.val)
			if err == nil {
				t.Fatal("decoded")
			}
			for _, want := range []string{`store: decode "acct/acme"`, tc.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// A time a record cannot hold is refused when it is written, naming the key
// and the field; the zero time is written and read back as the zero time.
func TestRecordTimes(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(0, math.MinInt64),
	} {
		_, err := (&holdRec{RequestID: "r", Created: tm}).encode([]byte("hold/r"))
		if err == nil || !strings.Contains(err.Error(), `store: encode "hold/r": created `) {
			t.Errorf("encoding created %v: %v", tm, err)
		}
	}
	ctx := context.Background()
	b := openTemp(t)
	credit(t, b, "acme", usd)
	err := b.Hold(ctx, store.Hold{RequestID: "req_far", Account: "acme", Amount: 1, Created: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err == nil || !strings.Contains(err.Error(), `"hold/req_far": created`) {
		t.Errorf("Hold created in 2300: %v", err)
	}
	if a := balance(t, b, "acme"); a.Held != 0 {
		t.Errorf("a refused hold holds %d", a.Held)
	}
	local := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	if err := b.Hold(ctx, store.Hold{RequestID: "req_local", Account: "acme", Amount: 1, Created: local}); err != nil {
		t.Fatal(err)
	}
	holds, err := b.OpenHolds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(holds) != 1 || !holds[0].Created.Equal(local) || holds[0].Created.Location() != time.UTC {
		t.Errorf("open holds %+v, want one created %v in UTC", holds, local)
	}
	var zero outcomeRec
	val, err := zero.encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := zero.decode(nil, val); err != nil || !zero.Time.IsZero() {
		t.Errorf("zero time read back as %v, %v", zero.Time, err)
	}
}

// Records that builds before the binary format wrote are JSON, byte for byte
// as below (json.Marshal of the records, whose tags have not changed). They
// are read through the same API as binary records, can be settled, credited,
// refunded and revoked (which rewrites them in the binary layout), and a
// journal of both kinds audits clean.
func TestLegacyJSONRecords(t *testing.T) {
	ctx := context.Background()
	b := openAt(t, t.TempDir(), "boot-new", false)
	hash := writeLegacyRecords(t, b)
	checkLegacyRead(t, b, hash)

	// Work on the legacy records: each rewrites what it changes in binary.
	// Both legacy holds are released: this build keeps its own in memory.
	if n, err := b.RecoverHolds(ctx); err != nil || n != 2 {
		t.Fatalf("RecoverHolds = %d, %v; want both legacy holds", n, err)
	}
	hold(t, b, "acme", "req_new", usd)
	if _, err := b.Settle(ctx, store.Settlement{RequestID: "req_new", Account: "acme", Charge: 1_000_000_000}); err != nil {
		t.Fatalf("settling after recovering legacy holds: %v", err)
	}
	if refunded, err := b.RefundJob(ctx, "vid_old", "failed"); err != nil || !refunded {
		t.Fatalf("refunding a legacy job: %v, %v", refunded, err)
	}
	if k, err := b.RevokeKey(ctx, "key_old"); err != nil || !k.Revoked || !reflect.DeepEqual(k.Exclude, []string{"gpt-x"}) {
		t.Fatalf("revoking a legacy key: %+v, %v", k, err)
	}
	for _, key := range []string{"acct/acme", "acct/globex", "key/" + hash, "done/req_mine", "done/req_crashed", "job/vid_old"} {
		if tagOf(t, b, key) == tagJSON {
			t.Errorf("%s is still JSON after it changed", key)
		}
	}
	if a := balance(t, b, "acme"); a.Balance != 8_350_000_000 || a.Held != 0 {
		t.Errorf("acme after settling: %+v, want 8.35 USD and nothing held", a)
	}
	if g := balance(t, b, "globex"); g.Balance != 2_300_000_000 {
		t.Errorf("globex after the refund: %+v, want 2.3 USD", g)
	}
	r := audit(t, b, "acme") // three JSON entries, two binary recoveries and a binary charge
	if r.Entries != 6 || r.Charges != 1_650_000_000 {
		t.Errorf("mixed audit: %+v", r)
	}
	audit(t, b, "globex")
}

// writeLegacyRecords writes the JSON records of two accounts, a key, two
// holds (one of this process's owner, one of a crashed one), an outcome, a
// job and their journals, and returns the key's hash.
func writeLegacyRecords(t *testing.T, b *Store) (hash string) {
	t.Helper()
	hash = store.HashKey("sk-old")
	legacy := map[string]string{
		"acct/acme":        `{"id":"acme","balance":9350000000,"held":2000000000,"seq":3,"created":"2026-11-21T18:34:08.278710818Z"}`,
		"acct/globex":      `{"id":"globex","balance":2000000000,"held":0,"seq":1,"created":"2026-11-21T18:34:08.278710818Z"}`,
		"key/" + hash:      `{"id":"key_old","hash":"` + hash + `","account":"acme","route":"auto","exclude":["gpt-x"],"created":"2026-11-21T18:34:08.28Z"}`,
		"keyid/key_old":    hash,
		"hold/req_mine":    `{"request_id":"req_mine","account":"acme","key_id":"key_old","model":"gpt-demo","route":"auto","endpoint":"chat","amount":1500000000,"created":"2026-11-21T18:34:09Z","owner":"boot-new"}`,
		"hold/req_crashed": `{"request_id":"req_crashed","account":"acme","model":"gpt-demo","amount":500000000,"created":"2026-11-21T18:34:09Z","owner":"boot-old"}`,
		"done/req_old":     `{"request_id":"req_old","account":"acme","state":"settled","hold":1000000000,"charge":400000000,"seq":2,"owner":"boot-old","time":"2026-11-21T18:34:08.5Z"}`,
		"job/vid_old":      `{"request_id":"vid_old","account":"globex","key_id":"key_g","model":"video","route":"r","line":"480p","amount":300000000,"created":"2026-11-21T18:34:08Z"}`,
	}
	journalJSON := map[string][]string{
		"acme": {
			`{"seq":1,"kind":"credit","account":"acme","usage":{},"amount":10000000000,"balance_after":10000000000,"time":"2026-11-21T18:34:08Z","note":"initial credit"}`,
			`{"seq":2,"kind":"charge","request_id":"req_old","account":"acme","key_id":"key_old","model":"gpt-demo","route":"auto","endpoint":"chat","usage":{"in":1000,"cache_read":50,"out":200},"hold":1000000000,"amount":-400000000,"balance_after":9600000000,"time":"2026-11-21T18:34:08.5Z"}`,
			`{"seq":3,"kind":"charge","request_id":"req_over","account":"acme","usage":{"in":4000},"hold":100000000,"amount":-250000000,"balance_after":9350000000,"time":"2026-11-21T18:34:08.6Z","note":"estimated"}`,
		},
		"globex": {
			`{"seq":1,"kind":"credit","account":"globex","usage":{},"amount":2000000000,"balance_after":2000000000,"time":"2026-11-21T18:34:08Z"}`,
		},
	}
	if err := b.db.Update(func(txn *badger.Txn) error {
		for k, v := range legacy {
			if err := txn.Set([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		for acct, entries := range journalJSON {
			for i, v := range entries {
				if err := txn.Set(journalKey(acct, uint64(i+1)), []byte(v)); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return hash
}

// checkLegacyRead wants the legacy records read through the API as they
// were written, and a legacy outcome to refuse a second settlement.
func checkLegacyRead(t *testing.T, b *Store, hash string) {
	t.Helper()
	ctx := context.Background()
	if a := balance(t, b, "acme"); a.Balance != 9_350_000_000 || a.Held != 2*usd || !a.Created.Equal(time.Date(2026, 11, 21, 18, 34, 8, 278710818, time.UTC)) {
		t.Errorf("legacy account: %+v", a)
	}
	r := audit(t, b, "acme")
	if r.Entries != 3 || r.Credits != 10*usd || r.Charges != 650_000_000 || r.OpenHolds != 2 {
		t.Errorf("legacy audit: %+v", r)
	}
	entries, err := b.Charges(ctx, "acme", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 || entries[1].Usage != (pricing.Usage{InputTokens: 1000, CacheReadTokens: 50, OutputTokens: 200}) ||
		entries[1].HoldAmount != usd || entries[0].Note != "estimated" || entries[2].Note != "initial credit" {
		t.Errorf("legacy journal: %+v", entries)
	}
	k, err := b.KeyByHash(ctx, hash)
	if err != nil || k.ID != "key_old" || k.Route != store.AutoRoute || !reflect.DeepEqual(k.Exclude, []string{"gpt-x"}) || k.Revoked {
		t.Errorf("legacy key: %+v, %v", k, err)
	}
	o, err := b.Outcome(ctx, "req_old")
	if err != nil || o.State != store.OutcomeSettled || o.Charge != 400_000_000 || o.Seq != 2 {
		t.Errorf("legacy outcome: %+v, %v", o, err)
	}
	hold(t, b, "acme", "req_old", 0)
	if _, err := b.Settle(ctx, store.Settlement{RequestID: "req_old", Account: "acme"}); !errors.Is(err, store.ErrExists) {
		t.Errorf("settling a hold on the id of a legacy outcome: %v, want ErrExists", err)
	}
}

// testdata/ledger-json is the data directory of a demo run by the build
// before the binary format (the JSON records; the process "crashed" with
// req_open held): credit acme 10 USD and globex 2.5 USD; keys
// key_demoacme0001 (sk-demo-acme, route auto, excluding gpt-x and claude-y)
// and key_demoglobex01 (sk-demo-globex, route cheap, revoked); req_settled
// (acme, hold 1, charge 0.4 USD), req_over (acme, hold 0.1, charge 0.25
// USD), req_released (globex, hold 0.5 USD, released "upstream 500"), video
// jobs job_1 and job_2 (globex, 0.3 USD each, job_1 refunded) and req_open
// (acme, hold 2 USD, owner demo-boot-1, never settled). Badger's DISCARD
// file is left out: badger creates it.
func TestLegacyDataDir(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	files, err := os.ReadDir("testdata/ledger-json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join("testdata/ledger-json", f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name()), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b, err := Open(dir, Options{Owner: "demo-boot-2", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("opening yesterday's data dir: %v", err)
	}
	first := b
	t.Cleanup(func() { _ = first.Close() }) // when a check below gives up early
	if a := balance(t, b, "acme"); a.Balance != 9_350_000_000 || a.Held != 2*usd {
		t.Errorf("acme: %+v, want 9.35 USD with 2 USD held", a)
	}
	if g := balance(t, b, "globex"); g.Balance != 2_200_000_000 || g.Held != 0 {
		t.Errorf("globex: %+v, want 2.2 USD with nothing held", g)
	}
	audit(t, b, "acme")
	audit(t, b, "globex")
	entries, err := b.Charges(ctx, "globex", 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range entries {
		kinds = append(kinds, e.Kind)
	}
	if want := []string{store.KindRefund, store.KindCharge, store.KindCharge, store.KindCredit}; !reflect.DeepEqual(kinds, want) {
		t.Errorf("globex journal kinds %v, want %v", kinds, want)
	}
	if k, err := b.KeyByHash(ctx, store.HashKey("sk-demo-acme")); err != nil || k.ID != "key_demoacme0001" || !reflect.DeepEqual(k.Exclude, []string{"gpt-x", "claude-y"}) {
		t.Errorf("acme's key: %+v, %v", k, err)
	}
	if k, err := b.KeyByHash(ctx, store.HashKey("sk-demo-globex")); err != nil || !k.Revoked || k.Route != "cheap" {
		t.Errorf("globex's key: %+v, %v", k, err)
	}
	if j, err := b.Job(ctx, "job_1"); err != nil || !j.Refunded || j.Amount != 300_000_000 {
		t.Errorf("job_1: %+v, %v", j, err)
	}
	if o, err := b.Outcome(ctx, "req_released"); err != nil || o.State != store.OutcomeReleased || o.Reason != "upstream 500" {
		t.Errorf("req_released: %+v, %v", o, err)
	}
	if n, err := b.RecoverHolds(ctx); err != nil || n != 1 {
		t.Fatalf("RecoverHolds = %d, %v; want req_open", n, err)
	}
	hold(t, b, "acme", "req_new", usd)
	if _, err := b.Settle(ctx, store.Settlement{RequestID: "req_new", Account: "acme", Charge: 350_000_000}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = openAt(t, dir, "demo-boot-3", false)
	if a := balance(t, b, "acme"); a.Balance != 9*usd || a.Held != 0 {
		t.Errorf("acme after reopening: %+v, want 9 USD and nothing held", a)
	}
	if r := audit(t, b, "acme"); r.Entries != 5 {
		t.Errorf("acme's journal has %d entries, want 5 (credit, 2 charges, recovery, charge)", r.Entries)
	}
}
