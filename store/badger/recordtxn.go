package badger

import (
	"errors"

	"github.com/dgraph-io/badger/v4"
)

// Reading and writing records in a transaction. The getters return
// badger.ErrKeyNotFound for a missing key; callers turn it into the API's
// error for what they were looking up.

// put writes the record that encode makes of itself under key.
func put(txn *badger.Txn, key []byte, encode func(key []byte) ([]byte, error)) error {
	val, err := encode(key)
	if err != nil {
		return err
	}
	return txn.Set(key, val)
}

func getAccount(txn *badger.Txn, key []byte) (r accountRec, err error) {
	err = getValue(txn, key, func(val []byte) error { return r.decode(key, val) })
	return r, err
}

func getKey(txn *badger.Txn, key []byte) (r keyRec, err error) {
	err = getValue(txn, key, func(val []byte) error { return r.decode(key, val) })
	return r, err
}

func getHold(txn *badger.Txn, key []byte) (r holdRec, err error) {
	err = getValue(txn, key, func(val []byte) error { return r.decode(key, val) })
	return r, err
}

func getJob(txn *badger.Txn, key []byte) (r jobRec, err error) {
	err = getValue(txn, key, func(val []byte) error { return r.decode(key, val) })
	return r, err
}

func getOutcome(txn *badger.Txn, key []byte) (r outcomeRec, err error) {
	err = getValue(txn, key, func(val []byte) error { return r.decode(key, val) })
	return r, err
}

func putAccount(txn *badger.Txn, r *accountRec) error {
	return put(txn, accountKey(r.ID), r.encode)
}

func putKey(txn *badger.Txn, r *keyRec) error {
	return put(txn, keyKey(r.Hash), r.encode)
}

// getSpend reads the spend record of key id: zero when it has none.
func getSpend(txn *badger.Txn, id string) (r spendRec, err error) {
	key := spendKey(id)
	err = getValue(txn, key, func(val []byte) error { return r.decode(key, val) })
	if errors.Is(err, badger.ErrKeyNotFound) {
		return spendRec{}, nil
	}
	return r, err
}

// getKeySpent reads the key record under key and its spend record.
func getKeySpent(txn *badger.Txn, key []byte) (keyRec, error) {
	r, err := getKey(txn, key)
	if err == nil {
		r.spend, err = getSpend(txn, r.ID)
	}
	return r, err
}

func putSpend(txn *badger.Txn, id string, r *spendRec) error {
	return put(txn, spendKey(id), r.encode)
}

func putHold(txn *badger.Txn, r *holdRec) error {
	return put(txn, holdKey(r.RequestID), r.encode)
}

func putEntry(txn *badger.Txn, r *entryRec) error {
	return put(txn, journalKey(r.Account, r.Seq), r.encode)
}

func putJob(txn *badger.Txn, r *jobRec) error {
	return put(txn, jobKey(r.RequestID), r.encode)
}

func putOutcome(txn *badger.Txn, r *outcomeRec) error {
	return put(txn, doneKey(r.RequestID), r.encode)
}
