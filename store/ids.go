package store

import (
	"crypto/sha256"
	"fmt"
	"unicode/utf8"
)

// The identifier and text rules of the store contract, the same in every
// store (storetest checks them): what an id, a key hash and a note may be.
const (
	MaxIDLen   = 256  // account, request, key and job ids
	MaxNoteLen = 1024 // notes and reasons are cut to this many bytes
)

// CheckID reports whether id can name a request, key or job (kind names
// the kind of id for the error): 1 to MaxIDLen bytes of valid UTF-8 with no
// control characters.
func CheckID(kind, id string) error {
	if id == "" {
		return fmt.Errorf("store: %s id is empty", kind)
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("store: %s id is %d bytes, more than %d", kind, len(id), MaxIDLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("store: %s id %q is not valid UTF-8", kind, id)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("store: %s id %q contains a control character", kind, id)
		}
	}
	return nil
}

// CheckAccountID is CheckID for an account id, which may not contain '/'.
func CheckAccountID(id string) error {
	if err := CheckID("account", id); err != nil {
		return err
	}
	for i := 0; i < len(id); i++ {
		if id[i] == '/' {
			return fmt.Errorf("store: account id %q contains '/'", id)
		}
	}
	return nil
}

// CheckKeyHash reports whether h is a key hash: the lowercase hex SHA-256.
func CheckKeyHash(h string) error {
	if len(h) != 2*sha256.Size {
		return fmt.Errorf("store: key hash is %d characters, not %d", len(h), 2*sha256.Size)
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("store: key hash has %q at %d: not lowercase hex", c, i)
		}
	}
	return nil
}

// ClipNote cuts a note or reason to at most MaxNoteLen bytes, on a rune
// boundary.
func ClipNote(s string) string {
	if len(s) <= MaxNoteLen {
		return s
	}
	s = s[:MaxNoteLen]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// CheckKey checks a key record before it is stored: its id, hash and
// account are well formed and its route is set.
func CheckKey(k Key) error {
	if err := CheckID("key", k.ID); err != nil {
		return err
	}
	if err := CheckKeyHash(k.Hash); err != nil {
		return err
	}
	if err := CheckAccountID(k.Account); err != nil {
		return err
	}
	if k.Route == "" {
		return fmt.Errorf("store: key %q: route is empty (a route name or %q)", k.ID, AutoRoute)
	}
	return nil
}

// CheckHold checks a hold before a store takes it (Hold, and an
// Allotter's Allot, Carve and HoldAdmitted): its request and account ids
// are well formed and its amount is not negative.
func CheckHold(h Hold) error {
	if err := CheckID("request", h.RequestID); err != nil {
		return err
	}
	if err := CheckAccountID(h.Account); err != nil {
		return err
	}
	if h.Amount < 0 {
		return fmt.Errorf("store: hold %q: amount %d nano-USD is negative", h.RequestID, h.Amount)
	}
	return nil
}

// CheckSettlement checks a settlement before a store settles it: its
// request id is well formed and its charge is not negative.
func CheckSettlement(s Settlement) error {
	if err := CheckID("request", s.RequestID); err != nil {
		return err
	}
	if s.Charge < 0 {
		return fmt.Errorf("store: settle %q: charge %d nano-USD is negative", s.RequestID, s.Charge)
	}
	return nil
}

// CheckJob checks a video job before PutJob records it: its request and
// account ids are well formed and its amount is not negative.
func CheckJob(j Job) error {
	if err := CheckID("job request", j.RequestID); err != nil {
		return err
	}
	if err := CheckAccountID(j.Account); err != nil {
		return err
	}
	if j.Amount < 0 {
		return fmt.Errorf("store: job %q: amount %d nano-USD is negative", j.RequestID, j.Amount)
	}
	return nil
}
