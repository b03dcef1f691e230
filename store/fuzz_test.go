package store

import (
	"bytes"
	"testing"
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
		if checkAccountID(a) != nil {
			return
		}
		got, err := journalSeq(a, journalKey(a, seq))
		if err != nil || got != seq {
			t.Fatalf("journalSeq(journalKey(%q, %d)) = %d, %v", a, seq, got, err)
		}
		if checkAccountID(b) != nil || a == b {
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
	f.Add(HashKey("sk-test"))
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		if checkHash(HashKey(s)) != nil {
			t.Fatalf("checkHash refused HashKey(%q)", s)
		}
		if checkHash(s) == nil && len(s) != 64 {
			t.Fatalf("checkHash accepted %q", s)
		}
		if checkHash(s) == nil && bytes.ContainsAny([]byte(s), "ABCDEFGHIJKLMNOPQRSTUVWXYZghijklmnopqrstuvwxyz-_ ") {
			t.Fatalf("checkHash accepted %q", s)
		}
	})
}
