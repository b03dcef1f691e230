package badger

import (
	"bytes"
	"fmt"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// The records below are the on-disk encoding. They are separate from the
// API types so that the format is owned here: amounts are plain int64
// nano-USD, and renaming an API field cannot change what old data means.
// Each has its binary layout (fields, which encodeRecord writes after the
// layout's tag; decode, which reads the same fields in the same order) and keeps the JSON tags of the records that
// builds before the binary format wrote, so that those are still read.

type accountRec struct {
	ID         string    `json:"id"`
	Balance    int64     `json:"balance"`
	Held       int64     `json:"held"`
	Seq        uint64    `json:"seq"` // the last journal entry's sequence number
	Created    time.Time `json:"created"`
	AlertBelow int64     `json:"alert_below,omitempty"` // v2
}

func (r accountRec) api() store.Account {
	return store.Account{ID: r.ID, Balance: pricing.Nano(r.Balance), Held: pricing.Nano(r.Held), Created: r.Created,
		AlertBelow: pricing.Nano(r.AlertBelow)}
}

type keyRec struct {
	ID      string    `json:"id"`
	Hash    string    `json:"hash"`
	Account string    `json:"account"`
	Route   string    `json:"route"`
	Exclude []string  `json:"exclude,omitempty"`
	Revoked bool      `json:"revoked,omitempty"`
	Created time.Time `json:"created"`

	// v2: the key's settings.
	Label   string    `json:"label,omitempty"`
	Limit   int64     `json:"limit,omitempty"`
	Reset   string    `json:"reset,omitempty"`
	Expires time.Time `json:"expires,omitzero"`
	Allow   []string  `json:"allow,omitempty"`

	// spend is not part of the key record: it is the key's spend record
	// (spend/<key id>), which readers put here.
	spend spendRec
}

// spendRec is what a key has spent in its period, spend/<key id>: kept
// apart from the key record because every settle of the key's calls writes
// it. A key without one has spent nothing, and its period has not begun.
type spendRec struct {
	Spent       int64
	PeriodStart time.Time
}

// api is the key as its records have it; Held is the caller's (keyMem).
func (r keyRec) api() store.Key {
	return store.Key{ID: r.ID, Hash: r.Hash, Account: r.Account, Route: r.Route,
		Exclude: r.Exclude, Revoked: r.Revoked, Created: r.Created,
		Label: r.Label, Limit: pricing.Nano(r.Limit), Reset: r.Reset, Expires: r.Expires, Allow: r.Allow,
		Spent: pricing.Nano(r.spend.Spent), PeriodStart: r.spend.PeriodStart}
}

// keyRecOf is the record of a key being created: its settings as given, and
// no spend (the ledger keeps that).
func keyRecOf(k store.Key) keyRec {
	return keyRec{ID: k.ID, Hash: k.Hash, Account: k.Account, Route: k.Route,
		Exclude: k.Exclude, Revoked: k.Revoked, Created: k.Created,
		Label: k.Label, Limit: int64(k.Limit), Reset: k.Reset, Expires: k.Expires, Allow: k.Allow}
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

func (r holdRec) api() store.Hold {
	return store.Hold{RequestID: r.RequestID, Account: r.Account, KeyID: r.KeyID, Model: r.Model,
		Route: r.Route, Endpoint: r.Endpoint, Amount: pricing.Nano(r.Amount), Created: r.Created, Owner: r.Owner}
}

func holdRecOf(h store.Hold) holdRec {
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

func (r entryRec) api() store.Entry {
	return store.Entry{Seq: r.Seq, Kind: r.Kind, RequestID: r.RequestID, Account: r.Account, KeyID: r.KeyID,
		Model: r.Model, Route: r.Route, Endpoint: r.Endpoint, Usage: r.Usage.api(),
		HoldAmount: pricing.Nano(r.HoldAmount), Amount: pricing.Nano(r.Amount),
		BalanceAfter: pricing.Nano(r.BalanceAfter), Time: r.Time, Note: r.Note}
}

func entryRecOf(e store.Entry) entryRec {
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

func (r jobRec) api() store.Job {
	return store.Job{RequestID: r.RequestID, Account: r.Account, KeyID: r.KeyID, Model: r.Model, Route: r.Route,
		Line: r.Line, Amount: pricing.Nano(r.Amount), Refunded: r.Refunded, Created: r.Created}
}

func jobRecOf(j store.Job) jobRec {
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

	// v3: the call, for Generation: a released call has no journal entry.
	KeyID    string `json:"key_id,omitempty"`
	Model    string `json:"model,omitempty"`
	Route    string `json:"route,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`

	compact bool // read from a settled outcome v2: the rest is in the journal
}

func (r outcomeRec) api() store.Outcome {
	return store.Outcome{RequestID: r.RequestID, Account: r.Account, State: r.State,
		HoldAmount: pricing.Nano(r.HoldAmount), Charge: pricing.Nano(r.Charge), Seq: r.Seq,
		Owner: r.Owner, Reason: r.Reason, Time: r.Time}
}

// Account v1: id, balance, held, seq, created.
// Account v2 (written since): v1's fields, then alert below.

func (r *accountRec) fields(e enc) enc {
	e.str(r.ID)
	e.varint(r.Balance)
	e.varint(r.Held)
	e.uvarint(r.Seq)
	e.time("created", r.Created)
	e.varint(r.AlertBelow)
	return e
}

func (r *accountRec) encode(key []byte) ([]byte, error) {
	return encodeRecord(key, tagAccountV2, r.fields)
}

func (r *accountRec) decode(key, val []byte) error {
	d, tag, isJSON, err := openRecordOf(key, val, tagAccountV2, tagAccountV1)
	if err != nil || isJSON {
		if isJSON {
			*r, err = decodeJSON[accountRec](key, val)
		}
		return err
	}
	r.ID = d.str("id")
	r.Balance = d.varint("balance")
	r.Held = d.varint("held")
	r.Seq = d.uvarint("seq")
	r.Created = d.time("created")
	r.AlertBelow = 0
	if tag == tagAccountV2 {
		r.AlertBelow = d.varint("alert_below")
	}
	return d.close(key)
}

// Key v1: id, hash, account, route, exclude (count, then each), revoked,
// created.
// Key v2 (written since): v1's fields, then label, limit, reset, expires,
// allow (count, then each).

func (r *keyRec) fields(e enc) enc {
	e.str(r.ID)
	e.str(r.Hash)
	e.str(r.Account)
	e.str(r.Route)
	e.strs(r.Exclude)
	e.boolean(r.Revoked)
	e.time("created", r.Created)
	e.str(r.Label)
	e.varint(r.Limit)
	e.str(r.Reset)
	e.time("expires", r.Expires)
	e.strs(r.Allow)
	return e
}

func (r *keyRec) encode(key []byte) ([]byte, error) {
	return encodeRecord(key, tagKeyV2, r.fields)
}

func (r *keyRec) decode(key, val []byte) error {
	d, tag, isJSON, err := openRecordOf(key, val, tagKeyV2, tagKeyV1)
	if err != nil || isJSON {
		if isJSON {
			*r, err = decodeJSON[keyRec](key, val)
		}
		return err
	}
	*r = keyRec{}
	r.ID = d.str("id")
	r.Hash = d.str("hash")
	r.Account = d.str("account")
	r.Route = d.str("route")
	r.Exclude = d.strs("exclude")
	r.Revoked = d.boolean("revoked")
	r.Created = d.time("created")
	if tag == tagKeyV2 {
		r.Label = d.str("label")
		r.Limit = d.varint("limit")
		r.Reset = d.str("reset")
		r.Expires = d.time("expires")
		r.Allow = d.strs("allow")
	}
	return d.close(key)
}

// Key spend v1: spent, period start.

func (r *spendRec) fields(e enc) enc {
	e.varint(r.Spent)
	e.time("period_start", r.PeriodStart)
	return e
}

func (r *spendRec) encode(key []byte) ([]byte, error) {
	return encodeRecord(key, tagSpendV1, r.fields)
}

func (r *spendRec) decode(key, val []byte) error {
	d, isJSON, err := openRecord(key, val, tagSpendV1)
	if err == nil && isJSON { // no build wrote one in JSON
		err = fmt.Errorf("store: decode %q: record is JSON, want %s", key, tagName(tagSpendV1))
	}
	if err != nil {
		return err
	}
	r.Spent = d.varint("spent")
	r.PeriodStart = d.time("period_start")
	return d.close(key)
}

// Hold v1: request id, account, key id, model, route, endpoint, amount,
// created, owner.

func (r *holdRec) fields(e enc) enc {
	e.str(r.RequestID)
	e.str(r.Account)
	e.str(r.KeyID)
	e.str(r.Model)
	e.str(r.Route)
	e.str(r.Endpoint)
	e.varint(r.Amount)
	e.time("created", r.Created)
	e.str(r.Owner)
	return e
}

func (r *holdRec) encode(key []byte) ([]byte, error) {
	return encodeRecord(key, tagHoldV1, r.fields)
}

func (r *holdRec) decode(key, val []byte) error {
	d, isJSON, err := openRecord(key, val, tagHoldV1)
	if err != nil || isJSON {
		if isJSON {
			*r, err = decodeJSON[holdRec](key, val)
		}
		return err
	}
	r.RequestID = d.str("request_id")
	r.Account = d.str("account")
	r.KeyID = d.str("key_id")
	r.Model = d.str("model")
	r.Route = d.str("route")
	r.Endpoint = d.str("endpoint")
	r.Amount = d.varint("amount")
	r.Created = d.time("created")
	r.Owner = d.str("owner")
	return d.close(key)
}

// Usage, inside a journal entry: input, cache read, cache write, cache
// write 1h, output, images, size tier, seconds, resolution, requests.

func (u *usageRec) fields(e *enc) {
	e.varint(u.Input)
	e.varint(u.CacheRead)
	e.varint(u.CacheWrite)
	e.varint(u.CacheWrite1h)
	e.varint(u.Output)
	e.varint(u.Images)
	e.str(u.SizeTier)
	e.varint(u.Seconds)
	e.str(u.Resolution)
	e.varint(u.Requests)
}

func (u *usageRec) decode(d *dec) {
	u.Input = d.varint("usage.in")
	u.CacheRead = d.varint("usage.cache_read")
	u.CacheWrite = d.varint("usage.cache_write")
	u.CacheWrite1h = d.varint("usage.cache_write_1h")
	u.Output = d.varint("usage.out")
	u.Images = d.varint("usage.images")
	u.SizeTier = d.str("usage.size_tier")
	u.Seconds = d.varint("usage.seconds")
	u.Resolution = d.str("usage.resolution")
	u.Requests = d.varint("usage.requests")
}

// Journal entry v1: seq, kind, request id, account, key id, model, route,
// endpoint, usage, hold, amount, balance after, time, note.

func (r *entryRec) fields(e enc) enc {
	e.uvarint(r.Seq)
	e.str(r.Kind)
	e.str(r.RequestID)
	e.str(r.Account)
	e.str(r.KeyID)
	e.str(r.Model)
	e.str(r.Route)
	e.str(r.Endpoint)
	r.Usage.fields(&e)
	e.varint(r.HoldAmount)
	e.varint(r.Amount)
	e.varint(r.BalanceAfter)
	e.time("time", r.Time)
	e.str(r.Note)
	return e
}

func (r *entryRec) encode(key []byte) ([]byte, error) {
	return encodeRecord(key, tagEntryV1, r.fields)
}

func (r *entryRec) decode(key, val []byte) error {
	d, isJSON, err := openRecord(key, val, tagEntryV1)
	if err != nil || isJSON {
		if isJSON {
			*r, err = decodeJSON[entryRec](key, val)
		}
		return err
	}
	r.Seq = d.uvarint("seq")
	r.Kind = d.str("kind")
	r.RequestID = d.str("request_id")
	r.Account = d.str("account")
	r.KeyID = d.str("key_id")
	r.Model = d.str("model")
	r.Route = d.str("route")
	r.Endpoint = d.str("endpoint")
	r.Usage.decode(&d)
	r.HoldAmount = d.varint("hold")
	r.Amount = d.varint("amount")
	r.BalanceAfter = d.varint("balance_after")
	r.Time = d.time("time")
	r.Note = d.str("note")
	return d.close(key)
}

// Job v1: request id, account, key id, model, route, line, amount, refunded,
// created.

func (r *jobRec) fields(e enc) enc {
	e.str(r.RequestID)
	e.str(r.Account)
	e.str(r.KeyID)
	e.str(r.Model)
	e.str(r.Route)
	e.str(r.Line)
	e.varint(r.Amount)
	e.boolean(r.Refunded)
	e.time("created", r.Created)
	return e
}

func (r *jobRec) encode(key []byte) ([]byte, error) {
	return encodeRecord(key, tagJobV1, r.fields)
}

func (r *jobRec) decode(key, val []byte) error {
	d, isJSON, err := openRecord(key, val, tagJobV1)
	if err != nil || isJSON {
		if isJSON {
			*r, err = decodeJSON[jobRec](key, val)
		}
		return err
	}
	r.RequestID = d.str("request_id")
	r.Account = d.str("account")
	r.KeyID = d.str("key_id")
	r.Model = d.str("model")
	r.Route = d.str("route")
	r.Line = d.str("line")
	r.Amount = d.varint("amount")
	r.Refunded = d.boolean("refunded")
	r.Created = d.time("created")
	return d.close(key)
}

// Outcome v1: request id, account, state, hold, charge, seq, owner, reason,
// time.
//
// Outcome v3 (released and recovered holds are written so since): v1's
// fields, then key id, model, route, endpoint, which Generation shows of a
// released call (it has no journal entry).
//
// Settled outcome v2: account, charge, seq, time. A settled call's journal
// entry (account, seq) has the rest: its hold amount and note, which
// Outcome reads from it; the request id is the key's. This is a third of
// v1's size, and outcomes are kept for good, one per call. The owner of a
// settled call's hold is not kept.

func (r *outcomeRec) settledFields(e enc) enc {
	e.str(r.Account)
	e.varint(r.Charge)
	e.uvarint(r.Seq)
	e.time("time", r.Time)
	return e
}

func (r *outcomeRec) fields(e enc) enc {
	e.str(r.RequestID)
	e.str(r.Account)
	e.str(r.State)
	e.varint(r.HoldAmount)
	e.varint(r.Charge)
	e.uvarint(r.Seq)
	e.str(r.Owner)
	e.str(r.Reason)
	e.time("time", r.Time)
	e.str(r.KeyID)
	e.str(r.Model)
	e.str(r.Route)
	e.str(r.Endpoint)
	return e
}

func (r *outcomeRec) encode(key []byte) ([]byte, error) {
	if r.State == store.OutcomeSettled {
		return encodeRecord(key, tagSettledV2, r.settledFields)
	}
	return encodeRecord(key, tagOutcomeV3, r.fields)
}

func (r *outcomeRec) decode(key, val []byte) error {
	if len(val) > 0 && val[0] == tagSettledV2 {
		if !bytes.HasPrefix(key, []byte(prefixDone)) {
			return fmt.Errorf("store: decode %q: a settled outcome under a key that is not %s<request id>", key, prefixDone)
		}
		d, _, _ := openRecord(key, val, tagSettledV2) // the tag is checked above
		*r = outcomeRec{RequestID: string(key[len(prefixDone):]), State: store.OutcomeSettled, compact: true}
		r.Account = d.str("account")
		r.Charge = d.varint("charge")
		r.Seq = d.uvarint("seq")
		r.Time = d.time("time")
		return d.close(key)
	}
	d, tag, isJSON, err := openRecordOf(key, val, tagOutcomeV3, tagOutcomeV1)
	if err != nil || isJSON {
		if isJSON {
			*r, err = decodeJSON[outcomeRec](key, val)
		}
		return err
	}
	*r = outcomeRec{}
	r.RequestID = d.str("request_id")
	r.Account = d.str("account")
	r.State = d.str("state")
	r.HoldAmount = d.varint("hold")
	r.Charge = d.varint("charge")
	r.Seq = d.uvarint("seq")
	r.Owner = d.str("owner")
	r.Reason = d.str("reason")
	r.Time = d.time("time")
	if tag == tagOutcomeV3 {
		r.KeyID = d.str("key_id")
		r.Model = d.str("model")
		r.Route = d.str("route")
		r.Endpoint = d.str("endpoint")
	}
	return d.close(key)
}
