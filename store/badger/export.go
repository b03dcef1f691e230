package badger

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// # Export
//
// Export streams the whole ledger to a store.Sink from one read
// transaction (relay store copy feeds it to PostgreSQL's Import): accounts
// with their journal counters and alert thresholds, keys with their hashes,
// settings and spend, each account's journal in sequence order, jobs, and
// outcomes, settled ones completed from their journal entries. Open holds
// are not exported; Held (of an account, of a key) shows them. A released
// call's key, model, route and endpoint are not in store.Outcome, so they
// are not exported.

var _ store.Exporter = (*Store)(nil)

// Export gives the whole ledger to to, in the order store.Sink names, read
// in one badger snapshot and streamed: one record in memory at a time.
// Accounts carry their journal counter as LastSeq, and in Held the sum of the
// holds open in this process and of those an older build left in the ledger
// (a copy runs after RecoverHolds, with none); keys their settings, their
// spend in their period, and in Held their holds open in this process. Journal entries are read
// account by account (jrnl/<account>/ in account id order); a journal entry
// of an account that does not exist is an error, not skipped. A settled
// outcome is completed from its journal entry, as Outcome does. Console
// logins come last, by email (key order). No error names a key hash.
func (b *Store) Export(ctx context.Context, to store.Sink) error {
	return b.view(ctx, func(txn *badger.Txn) error {
		if err := eachRecord(ctx, txn, prefixAccount, func(key, val []byte) error {
			var r accountRec
			if err := r.decode(key, val); err != nil {
				return err
			}
			a := r.api()
			a.Held += pricing.Nano(b.mem.heldOf(r.ID))
			return to.Account(store.ExportedAccount{Account: a, LastSeq: r.Seq})
		}); err != nil {
			return err
		}
		if err := eachRecord(ctx, txn, prefixKey, func(key, val []byte) error {
			hash := string(key[len(prefixKey):])
			var r keyRec
			if err := r.decode(key, val); err != nil {
				// The error names the badger key, which is the hash.
				return errors.New(strings.ReplaceAll(err.Error(), hash, "<hash>"))
			}
			if r.Hash != hash {
				return fmt.Errorf("store: export: key %q is filed under another hash than its own", r.ID)
			}
			var err error
			if r.spend, err = getSpend(txn, r.ID); err != nil {
				return err
			}
			return to.Key(b.mem.keyView(r))
		}); err != nil {
			return err
		}
		entries, err := exportJournal(ctx, txn, to)
		if err != nil {
			return err
		}
		if all := countKeys(txn, prefixJournal); all != entries {
			return fmt.Errorf("store: export: the journal has %d entries, and %d belong to accounts that exist", all, entries)
		}
		if err := eachRecord(ctx, txn, prefixJob, func(key, val []byte) error {
			var r jobRec
			if err := r.decode(key, val); err != nil {
				return err
			}
			return to.Job(r.api())
		}); err != nil {
			return err
		}
		if err := eachRecord(ctx, txn, prefixDone, func(key, val []byte) error {
			var r outcomeRec
			if err := r.decode(key, val); err != nil {
				return err
			}
			if err := completeSettled(txn, &r); err != nil {
				return err
			}
			return to.Outcome(r.api())
		}); err != nil {
			return err
		}
		return eachRecord(ctx, txn, prefixLogin, func(key, val []byte) error {
			var r loginRec
			if err := r.decode(key, val); err != nil {
				return err
			}
			return to.Login(r.api())
		})
	})
}

// exportJournal gives every account's journal to to, account by account in
// id order, each in sequence order, and returns how many entries it gave.
// (The keys of all journals together are not in account id order: "acme/"
// sorts after "acme-eu/".)
func exportJournal(ctx context.Context, txn *badger.Txn, to store.Sink) (int, error) {
	n := 0
	opts := badger.DefaultIteratorOptions
	opts.Prefix = []byte(prefixAccount)
	opts.PrefetchValues = false
	accts := txn.NewIterator(opts)
	defer accts.Close()
	for accts.Rewind(); accts.Valid(); accts.Next() {
		account := string(accts.Item().Key()[len(prefixAccount):])
		err := eachRecord(ctx, txn, string(journalPrefix(account)), func(key, val []byte) error {
			seq, err := journalSeq(account, key)
			if err != nil {
				return err
			}
			var r entryRec
			if err := r.decode(key, val); err != nil {
				return err
			}
			if r.Seq != seq || r.Account != account {
				return fmt.Errorf("store: export: journal key %q holds entry %d of account %q", key, r.Seq, r.Account)
			}
			n++
			return to.Entry(r.api())
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// eachRecord calls fn with the key and value of every key under prefix, in
// key order, stopping at the first error or when ctx ends. fn gets a copy
// of the value (reused for the next key), so that no read of badger's is in
// progress while the sink runs.
func eachRecord(ctx context.Context, txn *badger.Txn, prefix string, fn func(key, val []byte) error) error {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = []byte(prefix)
	it := txn.NewIterator(opts)
	defer it.Close()
	var val []byte
	for it.Rewind(); it.Valid(); it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		item := it.Item()
		var err error
		if val, err = item.ValueCopy(val[:0]); err != nil {
			return err
		}
		if err := fn(item.Key(), val); err != nil {
			return err
		}
	}
	return nil
}

// countKeys counts the keys under prefix, reading no values.
func countKeys(txn *badger.Txn, prefix string) int {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = []byte(prefix)
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	defer it.Close()
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		n++
	}
	return n
}
