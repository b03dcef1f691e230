package store

import "context"

// ExportedAccount is an account as an export gives it: the Account, and
// LastSeq, the sequence number of its last journal entry (0 for none), which
// the account's next entry follows.
type ExportedAccount struct {
	Account
	LastSeq uint64
}

// Sink receives the books of a store from Exporter.Export, one record at a
// time, in this order: every account, by id; every key, by hash; every
// journal entry, by account id, then sequence number; every video job, by
// request id; every hold outcome, by request id; every console login, by
// email. Ids, hashes and emails sort bytewise. Records are given exactly as
// the store keeps them (times at the store's precision, key hashes and
// logins' password and setup hashes, never a plaintext key). Console
// sessions are not exported: a copy signs everyone out. An error from a
// method stops the export, which returns it.
type Sink interface {
	Account(ExportedAccount) error
	Key(Key) error
	Entry(Entry) error
	Job(Job) error
	Outcome(Outcome) error
	Login(Login) error
}

// Exporter is a store that can give all of its books to a Sink, read in one
// consistent snapshot and streamed (never all in memory), for a copy from one
// store into another and to check such a copy. Open holds are not exported:
// an account's Held says whether any are open.
type Exporter interface {
	Export(ctx context.Context, to Sink) error
}
