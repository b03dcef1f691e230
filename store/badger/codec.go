package badger

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
)

// # Key layout
//
//	acct/<account>             account record: balance, held, journal counter, created, alert threshold
//	key/<sha256 hex>           key record (id, account, route, exclusions, revoked; label, limit, reset, expiry, allow-list)
//	keyid/<key id>             the hash of that key, for RevokeKey, UpdateKey and Hold
//	spend/<key id>             the key's spend in its period and the period's start (none: nothing spent yet)
//	hold/<request id>          an open hold, as older builds kept them (this one keeps them in memory)
//	done/<request id>          how a hold ended (Outcome): settled, released or recovered
//	jrnl/<account>/<seq>       journal entry; seq is 8 bytes big-endian, so byte order is journal order
//	job/<request id>           video job
//	login/<email>              console login (account, password hash, setup token hash and expiry)
//	setup/<setup hash>         the email of the login whose one-time setup token that is
//	sess/<session id>          console session (expires with badger's TTL at its expiry)
//	lsess/<email>\x00<id>      (empty) a login's session, so that SetPassword ends them all
//
// Next to badger's files, holds/ has the hold log (holdlog.go).
//
// Values are small records private to this package (records.go), kept
// inline in the LSM tree, so the value log needs no garbage collection.
// Account ids may not contain '/', so one account's journal prefix never
// covers another's. Journal sequence numbers are per account, from 1, and
// the counter lives in the account record, so the counter and the entry are
// written by the same transaction that changes the balance.

// Key prefixes (the layout above).
const (
	prefixAccount = "acct/"
	prefixKey     = "key/"
	prefixKeyID   = "keyid/"
	prefixHold    = "hold/"
	prefixDone    = "done/"
	prefixJournal = "jrnl/"
	prefixJob     = "job/"
	prefixSpend   = "spend/"
)

func accountKey(id string) []byte   { return prefixed(prefixAccount, id, 0) }
func keyKey(hash string) []byte     { return prefixed(prefixKey, hash, 0) }
func keyIDKey(id string) []byte     { return prefixed(prefixKeyID, id, 0) }
func holdKey(reqID string) []byte   { return prefixed(prefixHold, reqID, 0) }
func doneKey(reqID string) []byte   { return prefixed(prefixDone, reqID, 0) }
func jobKey(reqID string) []byte    { return prefixed(prefixJob, reqID, 0) }
func spendKey(keyID string) []byte  { return prefixed(prefixSpend, keyID, 0) }
func journalPrefix(a string) []byte { return append(prefixed(prefixJournal, a, 1), '/') }

// prefixed is prefix+id as a new slice with room for extra more bytes: one
// allocation, which badger may keep (txn.Set holds on to its key).
func prefixed(prefix, id string, extra int) []byte {
	b := make([]byte, 0, len(prefix)+len(id)+extra)
	return append(append(b, prefix...), id...)
}

// journalKey is jrnl/<account>/<seq as 8 bytes big-endian>, so that byte
// order is journal order. Account ids cannot contain '/', so one account's
// prefix never covers another's keys.
func journalKey(account string, seq uint64) []byte {
	b := append(prefixed(prefixJournal, account, 1+8), '/')
	return binary.BigEndian.AppendUint64(b, seq)
}

// journalSeq reads the sequence number back from a key of account.
func journalSeq(account string, key []byte) (uint64, error) {
	p := journalPrefix(account)
	if len(key) != len(p)+8 || string(key[:len(p)]) != string(p) {
		return 0, fmt.Errorf("store: journal key %q is not a key of account %q", key, account)
	}
	return binary.BigEndian.Uint64(key[len(p):]), nil
}

// addBalance returns the balance a+b of account, or an error naming the
// account if it overflows. (The error is built only then: this runs on every
// settlement.)
func addBalance(account string, a, b pricing.Nano) (pricing.Nano, error) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, fmt.Errorf("store: balance of account %q overflows: %d + %d nano-USD", account, a, b)
	}
	return s, nil
}

// now is the store's clock; every time it writes is UTC.
func now() time.Time { return time.Now().UTC() }

// # Record format
//
// A record (every value but keyid/<key id>, which is the bare hash) is
// binary: one format tag byte naming the record type and layout version
// (0x01 account, 0x02 key, 0x03 hold, 0x04 journal entry, 0x05 job,
// 0x06 outcome; all version 1; and 0x07, version 2 of a settled call's
// outcome, which keeps only account, charge, sequence number and time: the
// request id is its key's, and its hold amount and note are its journal
// entry's, where Outcome reads them), then its fields in a fixed order with
// no names and nothing after the last. Key limits added 0x08 account v2
// (v1 and the alert threshold), 0x09 key v2 (v1 and label, limit, reset,
// expiry, allow-list), 0x0a outcome v3 (v1 and the call's key id, model,
// route and endpoint, for a released call, which has no journal entry) and
// 0x0b key spend v1 (spent, period start); the web console added 0x0c
// login v1 and 0x0d session v1 (console.go has their fields). Each newer
// layout is v1's fields and then its own; the older is still read (its new fields zero), and a
// record is written in the newest when it next changes. A build before a
// tag cannot read a ledger that has one. Strings are a uvarint length and the
// bytes (as given: ids are valid UTF-8, notes are not checked); amounts and
// usage counts are zigzag varints of int64 nano-USD or units; sequence
// numbers and list lengths uvarints; a bool one byte, 0 or 1; a time 8 bytes
// big-endian of unix nanoseconds, the zero time as math.MinInt64, so a
// record holds times from 1678 to 2262 and refuses to encode others. Every
// varint is in its shortest form and the decoder refuses anything else, so
// a record has exactly one encoding (FuzzDecodeRecord checks it). The field
// order of each layout is written next to its code in records.go; changing
// it means a new tag, and readers keep reading the old ones.
//
// Builds before the binary format wrote JSON records, which begin with '{'
// (never a tag). They are still read, through the same record types, whose
// JSON field tags must therefore not change; a record is rewritten in binary
// when it next changes, and nothing converts the rest. A damaged record is an
// error naming its key: `store: decode "acct/acme": balance: truncated
// varint`.

// Format tags: the first byte of a record.
const (
	tagAccountV1 byte = 0x01
	tagKeyV1     byte = 0x02
	tagHoldV1    byte = 0x03
	tagEntryV1   byte = 0x04
	tagJobV1     byte = 0x05
	tagOutcomeV1 byte = 0x06
	tagSettledV2 byte = 0x07 // the outcome of a settled call (see outcomeRec)
	tagAccountV2 byte = 0x08 // v1 and the low-balance threshold
	tagKeyV2     byte = 0x09 // v1 and the key's settings and spend
	tagOutcomeV3 byte = 0x0a // v1 and the call's key, model, route, endpoint
	tagSpendV1   byte = 0x0b // a key's spend in its period
	tagLoginV1   byte = 0x0c // a console login
	tagSessionV1 byte = 0x0d // a console session
	tagJSON      byte = '{'  // a record written by a build before the binary format
)

// tagName names a format tag for error messages.
func tagName(tag byte) string {
	switch tag {
	case tagAccountV1:
		return "account v1"
	case tagKeyV1:
		return "key v1"
	case tagHoldV1:
		return "hold v1"
	case tagEntryV1:
		return "journal entry v1"
	case tagJobV1:
		return "job v1"
	case tagOutcomeV1:
		return "outcome v1"
	case tagSettledV2:
		return "settled outcome v2"
	case tagAccountV2:
		return "account v2"
	case tagKeyV2:
		return "key v2"
	case tagOutcomeV3:
		return "outcome v3"
	case tagSpendV1:
		return "key spend v1"
	case tagLoginV1:
		return "login v1"
	case tagSessionV1:
		return "session v1"
	case tagJSON:
		return "JSON"
	}
	return fmt.Sprintf("unknown tag 0x%02x", tag)
}

// Times a record can hold: math.MinInt64 nanoseconds stands for the zero
// time, so it is not one of them.
var (
	minRecordTime = time.Unix(0, math.MinInt64+1)
	maxRecordTime = time.Unix(0, math.MaxInt64)
)

// enc writes one record in two passes over the same field list: the first
// (b == nil) only counts the bytes, the second appends them to a slice made
// exactly that size. Badger keeps the slice txn.Set is given until the
// commit is written, so every record needs a slice of its own; counting first
// makes that slice the only allocation.
type enc struct {
	b   []byte
	n   int   // bytes counted by the first pass, tag excluded
	err error // the first field that cannot be written
}

// start ends the counting pass and begins the writing one with tag; it
// reports false, allocating nothing, when a field cannot be written.
func (e *enc) start(tag byte) bool {
	if e.err != nil {
		return false
	}
	e.b = make([]byte, 1, 1+e.n)
	e.b[0] = tag
	return true
}

// finish returns the record, or an error naming key and the field at fault.
func (e *enc) finish(key []byte) ([]byte, error) {
	if e.err != nil {
		return nil, fmt.Errorf("store: encode %q: %w", key, e.err)
	}
	return e.b, nil
}

// encodeRecord writes a record under key: tag, then the fields that fields
// appends, counted in a first pass and written in a second into a slice of
// exactly their size, the only allocation. fields takes the enc and returns
// it by value, so that calling it through a func value does not put the enc
// on the heap.
func encodeRecord(key []byte, tag byte, fields func(e enc) enc) ([]byte, error) {
	e := fields(enc{})
	if e.start(tag) {
		e = fields(e)
	}
	return e.finish(key)
}

func (e *enc) uvarint(v uint64) {
	if e.b == nil {
		e.n += uvarintLen(v)
		return
	}
	e.b = binary.AppendUvarint(e.b, v)
}

func (e *enc) varint(v int64) {
	e.uvarint(uint64(v<<1) ^ uint64(v>>63)) // zigzag, as binary.PutVarint
}

func (e *enc) str(s string) {
	if e.b == nil {
		e.n += uvarintLen(uint64(len(s))) + len(s)
		return
	}
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

// strs writes a list of strings: its length, then each.
func (e *enc) strs(list []string) {
	e.uvarint(uint64(len(list)))
	for _, s := range list {
		e.str(s)
	}
}

func (e *enc) boolean(v bool) {
	if e.b == nil {
		e.n++
		return
	}
	var c byte
	if v {
		c = 1
	}
	e.b = append(e.b, c)
}

// time writes t as unix nanoseconds; field names it in the error when t is
// out of their range.
func (e *enc) time(field string, t time.Time) {
	if e.b == nil {
		e.n += 8
		if !t.IsZero() && (t.Before(minRecordTime) || t.After(maxRecordTime)) && e.err == nil {
			e.err = fmt.Errorf("%s %s is outside the years 1678 to 2262 a record can hold", field, t.Format(time.RFC3339))
		}
		return
	}
	n := int64(math.MinInt64)
	if !t.IsZero() {
		n = t.UnixNano()
	}
	e.b = binary.BigEndian.AppendUint64(e.b, uint64(n))
}

// uvarintLen is the length of v as a uvarint.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// dec reads the fields of one record, after its tag, in the order enc wrote
// them. The record is one string, converted once from badger's bytes (which
// are only valid inside the read), and every string field is a piece of it:
// one allocation per record. After the first problem every read returns a
// zero value and err keeps the problem with the field it was found in.
type dec struct {
	s   string
	err error
}

// openRecord checks that val is a binary record with tag and returns its
// reader. json reports a record that older builds wrote as JSON, for the
// caller to decode as such.
func openRecord(key, val []byte, tag byte) (d dec, json bool, err error) {
	switch {
	case len(val) == 0:
		return dec{}, false, fmt.Errorf("store: decode %q: empty record", key)
	case val[0] == tagJSON:
		return dec{}, true, nil
	case val[0] != tag:
		return dec{}, false, fmt.Errorf("store: decode %q: record is %s, want %s", key, tagName(val[0]), tagName(tag))
	}
	return dec{s: string(val[1:])}, false, nil
}

// openRecordOf is openRecord for a record type with several layouts: it
// accepts any of tags, the newest first, and returns the one val has.
func openRecordOf(key, val []byte, tags ...byte) (d dec, tag byte, json bool, err error) {
	if len(val) > 0 && val[0] != tagJSON {
		for _, t := range tags {
			if val[0] == t {
				return dec{s: string(val[1:])}, t, false, nil
			}
		}
		names := make([]string, len(tags))
		for i, t := range tags {
			names[i] = tagName(t)
		}
		return dec{}, 0, false, fmt.Errorf("store: decode %q: record is %s, want %s", key, tagName(val[0]), strings.Join(names, " or "))
	}
	d, json, err = openRecord(key, val, 0)
	return d, 0, json, err
}

// close returns the reading error, if any, naming key; bytes left after the
// last field are one.
func (d *dec) close(key []byte) error {
	if d.err == nil && len(d.s) > 0 {
		d.err = fmt.Errorf("%d bytes after the last field", len(d.s))
	}
	if d.err != nil {
		return fmt.Errorf("store: decode %q: %w", key, d.err)
	}
	return nil
}

func (d *dec) fail(field, problem string) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: %s", field, problem)
	}
	d.s = ""
}

// uvarint reads a uvarint in its shortest form, as binary.Uvarint reads one
// from bytes, and refuses longer forms so that a record has one encoding.
func (d *dec) uvarint(field string) uint64 {
	var v uint64
	for i := 0; i < len(d.s) && i < binary.MaxVarintLen64; i++ {
		c := d.s[i]
		if c < 0x80 {
			switch {
			case i == binary.MaxVarintLen64-1 && c > 1:
				d.fail(field, "varint overflows 64 bits")
				return 0
			case i > 0 && c == 0:
				d.fail(field, "varint not in its shortest form")
				return 0
			}
			d.s = d.s[i+1:]
			return v | uint64(c)<<(7*i)
		}
		v |= uint64(c&0x7f) << (7 * i)
	}
	if len(d.s) >= binary.MaxVarintLen64 {
		d.fail(field, "varint overflows 64 bits")
	} else {
		d.fail(field, "truncated varint")
	}
	return 0
}

func (d *dec) varint(field string) int64 {
	u := d.uvarint(field)
	return int64(u>>1) ^ -int64(u&1)
}

func (d *dec) str(field string) string {
	n := d.uvarint(field)
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.s)) {
		d.fail(field, fmt.Sprintf("string of %d bytes, %d left", n, len(d.s)))
		return ""
	}
	s := d.s[:n]
	d.s = d.s[n:]
	return s
}

// count reads the length of a list of strings; each needs at least a byte,
// so a count above the bytes left is damage, refused before anything is
// allocated for it.
func (d *dec) count(field string) int {
	n := d.uvarint(field)
	if d.err == nil && n > uint64(len(d.s)) {
		d.fail(field, fmt.Sprintf("list of %d, %d bytes left", n, len(d.s)))
		return 0
	}
	return int(n)
}

// strs reads a list that strs wrote; nil when it is empty.
func (d *dec) strs(field string) []string {
	n := d.count(field)
	if n == 0 {
		return nil
	}
	list := make([]string, n)
	for i := range list {
		list[i] = d.str(field)
	}
	return list
}

func (d *dec) boolean(field string) bool {
	if len(d.s) == 0 {
		d.fail(field, "truncated bool")
		return false
	}
	c := d.s[0]
	if c > 1 {
		d.fail(field, fmt.Sprintf("bool byte 0x%02x", c))
		return false
	}
	d.s = d.s[1:]
	return c == 1
}

func (d *dec) time(field string) time.Time {
	if len(d.s) < 8 {
		d.fail(field, "truncated time")
		return time.Time{}
	}
	s := d.s[:8]
	n := int64(uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 |
		uint64(s[4])<<24 | uint64(s[5])<<16 | uint64(s[6])<<8 | uint64(s[7]))
	d.s = d.s[8:]
	if n == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// decodeJSON decodes a record that a build before the binary format wrote.
// It is a function of its own so that only this rare path puts a record on
// the heap (json.Unmarshal takes it as an interface).
func decodeJSON[T any](key, val []byte) (T, error) {
	var v T
	if err := json.Unmarshal(val, &v); err != nil {
		return v, fmt.Errorf("store: decode %q: %w", key, err)
	}
	return v, nil
}

// getValue reads key and hands its value to fn. A missing key returns
// badger.ErrKeyNotFound.
func getValue(txn *badger.Txn, key []byte, fn func(val []byte) error) error {
	item, err := txn.Get(key)
	if err != nil {
		return err
	}
	return item.Value(fn)
}

// exists reports whether key is present.
func exists(txn *badger.Txn, key []byte) (bool, error) {
	_, err := txn.Get(key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, badger.ErrKeyNotFound):
		return false, nil
	default:
		return false, err
	}
}
