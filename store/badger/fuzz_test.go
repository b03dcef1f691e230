package badger

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/store"
)

// Account and request ids arrive from the admin API and from providers. An
// id the store accepts must never let one account's journal prefix cover
// another account's entries, and a journal key must read back as its seq.
func FuzzJournalKeys(f *testing.F) {
	f.Add("acme", "acme2", uint64(1))
	f.Add("a", "a/b", uint64(0xffffffffffffffff))
	f.Add("acct_1", "acct_1\x00", uint64(0x2f2f2f2f2f2f2f2f))
	f.Add("é", "é\xff", uint64(47))
	f.Fuzz(func(t *testing.T, a, b string, seq uint64) {
		if store.CheckAccountID(a) != nil {
			return
		}
		got, err := journalSeq(a, journalKey(a, seq))
		if err != nil || got != seq {
			t.Fatalf("journalSeq(journalKey(%q, %d)) = %d, %v", a, seq, got, err)
		}
		if store.CheckAccountID(b) != nil || a == b {
			return
		}
		if bytes.HasPrefix(journalKey(b, seq), journalPrefix(a)) {
			t.Fatalf("journal key of %q is under the prefix of %q", b, a)
		}
		if _, err := journalSeq(a, journalKey(b, seq)); err == nil {
			t.Fatalf("journal key of %q read as a key of %q", b, a)
		}
	})
}

// Key hashes arrive from the gateway, computed from client bytes; only the
// exact form HashKey produces may pass.
func FuzzCheckHash(f *testing.F) {
	f.Add("sk-test")
	f.Add(store.HashKey("sk-test"))
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		if store.CheckKeyHash(store.HashKey(s)) != nil {
			t.Fatalf("checkHash refused HashKey(%q)", s)
		}
		if store.CheckKeyHash(s) == nil && len(s) != 64 {
			t.Fatalf("checkHash accepted %q", s)
		}
		if store.CheckKeyHash(s) == nil && bytes.ContainsAny([]byte(s), "ABCDEFGHIJKLMNOPQRSTUVWXYZghijklmnopqrstuvwxyz-_ ") {
			t.Fatalf("checkHash accepted %q", s)
		}
	})
}

// Record values are read back from disk, where damage or a build's bug can
// put any bytes. Decoding must never panic; whatever decodes as a binary
// record is encoded back to exactly the same bytes (one encoding per
// record), or, from an older layout, to the newest, which reads back as the
// same record; whatever decodes from JSON (older builds) re-encodes to a binary
// record that decodes to the same record again.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range samples {
		val, err := s.rec.encode(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(val)
		f.Add(val[:len(val)/2])
	}
	f.Add([]byte(`{"id":"acme","balance":9350000000,"held":2000000000,"seq":3,"created":"2026-11-21T18:34:08.278710818Z"}`))
	f.Add([]byte(`{"request_id":"r","exclude":["a"],"usage":{"in":5},"time":"2026-11-21T18:34:08+01:00","refunded":true}`))
	f.Add([]byte(`{"created":"9999-12-31T23:59:59Z"}`))
	f.Add([]byte{})
	f.Add([]byte{tagKeyV1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	for _, r := range beforeKeyLimits {
		val, err := hex.DecodeString(r.hex)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(val)
	}
	key := []byte("done/fuzz") // a settled outcome takes its request id from the key
	f.Fuzz(func(t *testing.T, val []byte) {
		for _, rec := range allRecords() {
			if err := rec.decode(key, val); err != nil {
				if !strings.Contains(err.Error(), `store: decode "done/fuzz"`) {
					t.Fatalf("%T: error %q does not name the key", rec, err)
				}
				continue
			}
			again, err := rec.encode(key)
			if o, ok := rec.(*outcomeRec); ok && val[0] == tagOutcomeV1 && o.State == store.OutcomeSettled {
				// A settled outcome v1 is written back as v2, without
				// what its journal entry has.
				var back outcomeRec
				if err != nil || again[0] != tagSettledV2 || back.decode(key, again) != nil ||
					back != (outcomeRec{RequestID: "fuzz", Account: o.Account, State: o.State, Charge: o.Charge, Seq: o.Seq, Time: o.Time, compact: true}) {
					t.Fatalf("settled outcome v1 %+v written back as %x (%v): %+v", o, again, err, back)
				}
				continue
			}
			if upgraded(val[0]) {
				// An older layout is written back in the newest, which
				// reads back as the same record.
				back := newRecord(rec)
				if err != nil || again[0] == val[0] || back.decode(key, again) != nil || !reflect.DeepEqual(back, rec) {
					t.Fatalf("%T: %x written back as %x (%v): %+v", rec, val, again, err, back)
				}
				continue
			}
			if val[0] != tagJSON {
				if err != nil || !bytes.Equal(again, val) {
					t.Fatalf("%T: decoded %x, encoded back %x, %v", rec, val, again, err)
				}
				continue
			}
			if err != nil {
				// JSON can carry a time outside what a record holds.
				if !strings.Contains(err.Error(), "outside the years") {
					t.Fatalf("%T: re-encoding a JSON record: %v", rec, err)
				}
				continue
			}
			back := newRecord(rec)
			if err := back.decode(key, again); err != nil {
				t.Fatalf("%T: binary form of a JSON record does not decode: %v", rec, err)
			}
			third, err := back.encode(key)
			if err != nil || !bytes.Equal(third, again) {
				t.Fatalf("%T: JSON record does not settle into one binary form: %x then %x, %v", rec, again, third, err)
			}
		}
	})
}

// upgraded reports whether a record of this tag is written back in a newer
// layout.
func upgraded(tag byte) bool {
	return tag == tagAccountV1 || tag == tagKeyV1 || tag == tagOutcomeV1
}

// A hold log segment is read back after a crash, possibly torn or damaged:
// reading never panics, and what it returns is exactly the whole frames at
// the start of the segment; when it reports no damage, nothing but zeros
// (the unwritten rest of a mapped segment) follows them.
func FuzzReadSegment(f *testing.F) {
	var seg []byte
	for _, h := range []holdRec{
		{RequestID: "req_1", Account: "acme", KeyID: "key_1", Model: "m", Route: "r", Endpoint: "chat", Amount: 2_000_000, Owner: "boot"},
		{RequestID: "req_2", Account: "acme", Amount: 0},
	} {
		rec, err := h.encode(holdKey(h.RequestID))
		if err != nil {
			f.Fatal(err)
		}
		seg = appendFrame(seg, rec)
	}
	f.Add(seg)
	f.Add(append(bytes.Clone(seg), make([]byte, 64)...))
	f.Add(seg[:len(seg)-3])
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		holds, problem := readSegment("seg", data)
		var again []byte
		for _, h := range holds {
			rec, err := h.encode(holdKey(h.RequestID))
			if err != nil {
				t.Fatalf("a hold read back does not encode: %v", err)
			}
			again = appendFrame(again, rec)
		}
		if !bytes.HasPrefix(data, again) {
			t.Fatalf("the holds read are not the frames the segment starts with")
		}
		if problem == "" && strings.Trim(string(data[len(again):]), "\x00") != "" {
			t.Fatalf("no damage reported, but %d bytes after the frames are not zeros", len(data)-len(again))
		}
	})
}
