package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// PutJob records a video job. Its account must exist (ErrNotFound); a job
// with the same request id returns ErrExists.
func (s *Store) PutJob(ctx context.Context, j store.Job) error {
	if err := store.CheckJob(j); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO jobs (request_id, account, key_id, model, route, line, amount, refunded, created)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		j.RequestID, j.Account, j.KeyID, j.Model, j.Route, j.Line, int64(j.Amount), j.Refunded, stamp(j.Created))
	if err != nil {
		return mapErr(fmt.Sprintf("job %q", j.RequestID), err)
	}
	return nil
}

const jobCols = `request_id, account, key_id, model, route, line, amount, refunded, created`

func scanJob(row pgx.Row) (store.Job, error) {
	var (
		j      store.Job
		amount int64
	)
	if err := row.Scan(&j.RequestID, &j.Account, &j.KeyID, &j.Model, &j.Route, &j.Line, &amount, &j.Refunded, &j.Created); err != nil {
		return store.Job{}, err
	}
	j.Amount, j.Created = pricing.Nano(amount), j.Created.UTC()
	return j, nil
}

// Job returns the job; ErrNotFound if there is none.
func (s *Store) Job(ctx context.Context, requestID string) (store.Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs WHERE request_id = $1`, requestID))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Job{}, fmt.Errorf("postgres: job %q: %w", requestID, store.ErrNotFound)
	}
	if err != nil {
		return store.Job{}, mapErr("job", err)
	}
	return j, nil
}

// RefundJob credits the job's amount back exactly once, in one statement:
// the conditional UPDATE … WHERE refunded = false row-locks the job, so of
// two racing refunds the second re-checks the committed row and changes
// nothing; the account's balance and the KindRefund entry commit with it.
// refunded is true only for the call that did it. An unknown job returns
// ErrNotFound. It does not give up when ctx is cancelled (the op timeout
// still bounds it).
func (s *Store) RefundJob(ctx context.Context, requestID, reason string) (refunded bool, err error) {
	ctx, cancel := s.detach(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `
WITH j AS (
	UPDATE jobs SET refunded = true WHERE request_id = $1 AND refunded = false RETURNING *),
a AS (
	UPDATE accounts acc SET balance = acc.balance + j.amount, seq = acc.seq + 1
	FROM j WHERE acc.id = j.account
	RETURNING acc.id, acc.balance, acc.seq)
INSERT INTO journal (account, seq, kind, request_id, key_id, model, route, endpoint, amount, balance_after, note)
SELECT a.id, a.seq, 'refund', j.request_id, j.key_id, j.model, j.route, $2::text, j.amount, a.balance, $3::text FROM a, j`,
		requestID, pricing.EndpointVideo, store.ClipNote(reason))
	if err != nil {
		return false, mapErr(fmt.Sprintf("refund job %q", requestID), err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	if _, err := s.Job(ctx, requestID); err != nil {
		return false, err
	}
	return false, nil
}
