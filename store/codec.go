package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
)

// Key prefixes; doc.go describes the layout.
const (
	prefixAccount = "acct/"
	prefixKey     = "key/"
	prefixKeyID   = "keyid/"
	prefixHold    = "hold/"
	prefixDone    = "done/"
	prefixJournal = "jrnl/"
	prefixJob     = "job/"
)

// Limits on identifiers and free text.
const (
	maxIDLen   = 256  // account, request, key and job ids
	maxNoteLen = 1024 // notes and reasons are cut to this many bytes
)

func accountKey(id string) []byte   { return []byte(prefixAccount + id) }
func keyKey(hash string) []byte     { return []byte(prefixKey + hash) }
func keyIDKey(id string) []byte     { return []byte(prefixKeyID + id) }
func holdKey(reqID string) []byte   { return []byte(prefixHold + reqID) }
func doneKey(reqID string) []byte   { return []byte(prefixDone + reqID) }
func jobKey(reqID string) []byte    { return []byte(prefixJob + reqID) }
func journalPrefix(a string) []byte { return []byte(prefixJournal + a + "/") }

// journalKey is jrnl/<account>/<seq as 8 bytes big-endian>, so that byte
// order is journal order. Account ids cannot contain '/', so one account's
// prefix never covers another's keys.
func journalKey(account string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(journalPrefix(account), seq)
}

// journalSeq reads the sequence number back from a key of account.
func journalSeq(account string, key []byte) (uint64, error) {
	p := journalPrefix(account)
	if len(key) != len(p)+8 || string(key[:len(p)]) != string(p) {
		return 0, fmt.Errorf("store: journal key %q is not a key of account %q", key, account)
	}
	return binary.BigEndian.Uint64(key[len(p):]), nil
}

// checkAccountID reports whether id can name an account: 1 to 256 bytes of
// valid UTF-8 with no '/' and no control characters.
func checkAccountID(id string) error {
	if err := checkID("account", id); err != nil {
		return err
	}
	for i := 0; i < len(id); i++ {
		if id[i] == '/' {
			return fmt.Errorf("store: account id %q contains '/'", id)
		}
	}
	return nil
}

// checkID reports whether id can name a request, key or job (field names
// the kind of id for the error): 1 to 256 bytes of valid UTF-8 with no
// control characters.
func checkID(field, id string) error {
	if id == "" {
		return fmt.Errorf("store: %s id is empty", field)
	}
	if len(id) > maxIDLen {
		return fmt.Errorf("store: %s id is %d bytes, more than %d", field, len(id), maxIDLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("store: %s id %q is not valid UTF-8", field, id)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("store: %s id %q contains a control character", field, id)
		}
	}
	return nil
}

// clip cuts s to at most maxNoteLen bytes on a rune boundary.
func clip(s string) string {
	if len(s) <= maxNoteLen {
		return s
	}
	s = s[:maxNoteLen]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// addNano returns a+b, or an error naming field if it overflows.
func addNano(field string, a, b pricing.Nano) (pricing.Nano, error) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, fmt.Errorf("store: %s overflows: %d + %d nano-USD", field, a, b)
	}
	return s, nil
}

// now is the store's clock; every time it writes is UTC.
func now() time.Time { return time.Now().UTC() }

// getJSON loads key into v. A missing key returns badger.ErrKeyNotFound.
func getJSON(txn *badger.Txn, key []byte, v any) error {
	item, err := txn.Get(key)
	if err != nil {
		return err
	}
	return item.Value(func(val []byte) error { return decode(key, val, v) })
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

// setJSON stores v under key.
func setJSON(txn *badger.Txn, key []byte, v any) error {
	val, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("store: encode %q: %w", key, err)
	}
	return txn.Set(key, val)
}

func decode(key, val []byte, v any) error {
	if err := json.Unmarshal(val, v); err != nil {
		return fmt.Errorf("store: decode %q: %w", key, err)
	}
	return nil
}

// The records below are the on-disk encoding. They are separate from the
// API types so that the format is owned here: amounts are plain int64
// nano-USD whatever JSON form pricing.Nano takes elsewhere, and renaming an
// API field cannot change what old data means.

type accountRec struct {
	ID      string    `json:"id"`
	Balance int64     `json:"balance"`
	Held    int64     `json:"held"`
	Seq     uint64    `json:"seq"` // the last journal entry's sequence number
	Created time.Time `json:"created"`
}

func (r accountRec) api() Account {
	return Account{ID: r.ID, Balance: pricing.Nano(r.Balance), Held: pricing.Nano(r.Held), Created: r.Created}
}

type keyRec struct {
	ID      string    `json:"id"`
	Hash    string    `json:"hash"`
	Account string    `json:"account"`
	Route   string    `json:"route"`
	Exclude []string  `json:"exclude,omitempty"`
	Revoked bool      `json:"revoked,omitempty"`
	Created time.Time `json:"created"`
}

func (r keyRec) api() Key {
	return Key{ID: r.ID, Hash: r.Hash, Account: r.Account, Route: r.Route,
		Exclude: r.Exclude, Revoked: r.Revoked, Created: r.Created}
}

func keyRecOf(k Key) keyRec {
	return keyRec{ID: k.ID, Hash: k.Hash, Account: k.Account, Route: k.Route,
		Exclude: k.Exclude, Revoked: k.Revoked, Created: k.Created}
}

type holdRec struct {
	RequestID string    `json:"request_id"`
	Account   string    `json:"account"`
	KeyID     string    `json:"key_id,omitempty"`
	Model     string    `json:"model,omitempty"`
	Route     string    `json:"route,omitempty"`
	Endpoint  string    `json:"endpoint,omitempty"`
	Amount    int64     `json:"amount"`
	Created   time.Time `json:"created"`
	Owner     string    `json:"owner"`
}

func (r holdRec) api() Hold {
	return Hold{RequestID: r.RequestID, Account: r.Account, KeyID: r.KeyID, Model: r.Model,
		Route: r.Route, Endpoint: r.Endpoint, Amount: pricing.Nano(r.Amount), Created: r.Created, Owner: r.Owner}
}

func holdRecOf(h Hold) holdRec {
	return holdRec{RequestID: h.RequestID, Account: h.Account, KeyID: h.KeyID, Model: h.Model,
		Route: h.Route, Endpoint: h.Endpoint, Amount: int64(h.Amount), Created: h.Created, Owner: h.Owner}
}

type usageRec struct {
	Input        int64  `json:"in,omitempty"`
	CacheRead    int64  `json:"cache_read,omitempty"`
	CacheWrite   int64  `json:"cache_write,omitempty"`
	CacheWrite1h int64  `json:"cache_write_1h,omitempty"`
	Output       int64  `json:"out,omitempty"`
	Images       int64  `json:"images,omitempty"`
	SizeTier     string `json:"size_tier,omitempty"`
	Seconds      int64  `json:"seconds,omitempty"`
	Resolution   string `json:"resolution,omitempty"`
	Requests     int64  `json:"requests,omitempty"`
}

func usageRecOf(u pricing.Usage) usageRec {
	return usageRec{Input: u.InputTokens, CacheRead: u.CacheReadTokens, CacheWrite: u.CacheWriteTokens,
		CacheWrite1h: u.CacheWrite1hTokens, Output: u.OutputTokens, Images: u.Images, SizeTier: u.SizeTier,
		Seconds: u.Seconds, Resolution: u.Resolution, Requests: u.Requests}
}

func (r usageRec) api() pricing.Usage {
	return pricing.Usage{InputTokens: r.Input, CacheReadTokens: r.CacheRead, CacheWriteTokens: r.CacheWrite,
		CacheWrite1hTokens: r.CacheWrite1h, OutputTokens: r.Output, Images: r.Images, SizeTier: r.SizeTier,
		Seconds: r.Seconds, Resolution: r.Resolution, Requests: r.Requests}
}

type entryRec struct {
	Seq          uint64    `json:"seq"`
	Kind         string    `json:"kind"`
	RequestID    string    `json:"request_id,omitempty"`
	Account      string    `json:"account"`
	KeyID        string    `json:"key_id,omitempty"`
	Model        string    `json:"model,omitempty"`
	Route        string    `json:"route,omitempty"`
	Endpoint     string    `json:"endpoint,omitempty"`
	Usage        usageRec  `json:"usage"`
	HoldAmount   int64     `json:"hold,omitempty"`
	Amount       int64     `json:"amount"`
	BalanceAfter int64     `json:"balance_after"`
	Time         time.Time `json:"time"`
	Note         string    `json:"note,omitempty"`
}

func (r entryRec) api() Entry {
	return Entry{Seq: r.Seq, Kind: r.Kind, RequestID: r.RequestID, Account: r.Account, KeyID: r.KeyID,
		Model: r.Model, Route: r.Route, Endpoint: r.Endpoint, Usage: r.Usage.api(),
		HoldAmount: pricing.Nano(r.HoldAmount), Amount: pricing.Nano(r.Amount),
		BalanceAfter: pricing.Nano(r.BalanceAfter), Time: r.Time, Note: r.Note}
}

func entryRecOf(e Entry) entryRec {
	return entryRec{Seq: e.Seq, Kind: e.Kind, RequestID: e.RequestID, Account: e.Account, KeyID: e.KeyID,
		Model: e.Model, Route: e.Route, Endpoint: e.Endpoint, Usage: usageRecOf(e.Usage),
		HoldAmount: int64(e.HoldAmount), Amount: int64(e.Amount), BalanceAfter: int64(e.BalanceAfter),
		Time: e.Time, Note: e.Note}
}

type jobRec struct {
	RequestID string    `json:"request_id"`
	Account   string    `json:"account"`
	KeyID     string    `json:"key_id,omitempty"`
	Model     string    `json:"model,omitempty"`
	Route     string    `json:"route,omitempty"`
	Line      string    `json:"line,omitempty"`
	Amount    int64     `json:"amount"`
	Refunded  bool      `json:"refunded,omitempty"`
	Created   time.Time `json:"created"`
}

func (r jobRec) api() Job {
	return Job{RequestID: r.RequestID, Account: r.Account, KeyID: r.KeyID, Model: r.Model, Route: r.Route,
		Line: r.Line, Amount: pricing.Nano(r.Amount), Refunded: r.Refunded, Created: r.Created}
}

func jobRecOf(j Job) jobRec {
	return jobRec{RequestID: j.RequestID, Account: j.Account, KeyID: j.KeyID, Model: j.Model, Route: j.Route,
		Line: j.Line, Amount: int64(j.Amount), Refunded: j.Refunded, Created: j.Created}
}

type outcomeRec struct {
	RequestID  string    `json:"request_id"`
	Account    string    `json:"account"`
	State      string    `json:"state"`
	HoldAmount int64     `json:"hold"`
	Charge     int64     `json:"charge,omitempty"`
	Seq        uint64    `json:"seq,omitempty"`
	Owner      string    `json:"owner,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Time       time.Time `json:"time"`
}

func (r outcomeRec) api() Outcome {
	return Outcome{RequestID: r.RequestID, Account: r.Account, State: r.State,
		HoldAmount: pricing.Nano(r.HoldAmount), Charge: pricing.Nano(r.Charge), Seq: r.Seq,
		Owner: r.Owner, Reason: r.Reason, Time: r.Time}
}
