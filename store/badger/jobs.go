package badger

import (
	"context"
	"errors"
	"fmt"
	"github.com/modelrelay/modelrelay/store"

	"github.com/dgraph-io/badger/v4"

	"github.com/modelrelay/modelrelay/pricing"
)

// PutJob records a video job once its fee has been charged. Its account must
// exist (ErrNotFound); a job with the same request id returns ErrExists, so
// a job can never be rewritten (and its Refunded flag never reset). A zero
// j.Created is set to now.
func (b *Store) PutJob(ctx context.Context, j store.Job) error {
	if err := store.CheckJob(j); err != nil {
		return err
	}
	if j.Created.IsZero() {
		j.Created = now()
	}
	j.Created = j.Created.UTC()
	rec := jobRecOf(j)
	return b.update(ctx, func(txn *badger.Txn) error {
		if _, err := loadAccount(txn, j.Account); err != nil {
			return err
		}
		ok, err := exists(txn, jobKey(j.RequestID))
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("store: job %q: %w", j.RequestID, store.ErrExists)
		}
		return putJob(txn, &rec)
	})
}

// Job returns the job; ErrNotFound if there is none. The caller checks that
// it belongs to the asking account.
func (b *Store) Job(ctx context.Context, requestID string) (store.Job, error) {
	var rec jobRec
	err := b.view(ctx, func(txn *badger.Txn) error {
		var err error
		rec, err = loadJob(txn, requestID)
		return err
	})
	if err != nil {
		return store.Job{}, err
	}
	return rec.api(), nil
}

// RefundJob credits the job's amount back to its account exactly once, with
// a KindRefund entry (Amount = +job.Amount), and marks the job refunded in
// the same transaction. refunded is true only for the call that did it;
// every other call, concurrent or later, returns false and no error. An
// unknown job returns ErrNotFound. Like Settle, it does not give up when ctx
// is cancelled.
func (b *Store) RefundJob(ctx context.Context, requestID, reason string) (refunded bool, err error) {
	ctx = context.WithoutCancel(ctx)
	j, err := b.Job(ctx, requestID)
	if err != nil {
		return false, err
	}
	if j.Refunded {
		return false, nil
	}
	defer b.lock(j.Account)()
	var acct accountRec
	err = b.update(ctx, func(txn *badger.Txn) error {
		refunded = false
		rec, err := loadJob(txn, requestID)
		if err != nil {
			return err
		}
		if rec.Refunded {
			return nil
		}
		acct, err = loadAccount(txn, rec.Account)
		if err != nil {
			return err
		}
		bal, err := addBalance(acct.ID, pricing.Nano(acct.Balance), pricing.Nano(rec.Amount))
		if err != nil {
			return err
		}
		acct.Balance = int64(bal)
		if _, err := journal(txn, &acct, entryRec{
			Kind: store.KindRefund, RequestID: rec.RequestID, KeyID: rec.KeyID, Model: rec.Model,
			Route: rec.Route, Endpoint: pricing.EndpointVideo, Amount: rec.Amount, Note: store.ClipNote(reason),
		}); err != nil {
			return err
		}
		rec.Refunded = true
		if err := putJob(txn, &rec); err != nil {
			return err
		}
		refunded = true
		return nil
	})
	var wrote *accountRec
	if refunded {
		wrote = &acct
	}
	if err := b.afterWrite(j.Account, wrote, err); err != nil {
		return false, err
	}
	return refunded, nil
}

func loadJob(txn *badger.Txn, requestID string) (jobRec, error) {
	rec, err := getJob(txn, jobKey(requestID))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return rec, fmt.Errorf("store: job %q: %w", requestID, store.ErrNotFound)
	}
	return rec, err
}
