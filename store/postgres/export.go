package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

var _ store.Exporter = (*Store)(nil)

// Export gives every account, key, journal entry, job, outcome and console
// login to to, in the order store.Sink names (ids sort bytewise: COLLATE
// "C"), read in one REPEATABLE READ snapshot and streamed row by row. Its
// statements have no statement timeout: reading large books takes as long as
// it takes. Open holds and console sessions are not exported; an account's
// Held counts its holds.
func (s *Store) Export(ctx context.Context, to store.Sink) error {
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 0`); err != nil {
			return err
		}
		steps := []struct {
			sql  string
			scan func(pgx.Rows) error
		}{
			{`SELECT id, balance, held, created, alert_below, seq FROM accounts ORDER BY id COLLATE "C"`, func(r pgx.Rows) error {
				var (
					a                         store.ExportedAccount
					balance, held, alert, seq int64
				)
				if err := r.Scan(&a.ID, &balance, &held, &a.Created, &alert, &seq); err != nil {
					return err
				}
				a.Balance, a.Held, a.Created, a.LastSeq = pricing.Nano(balance), pricing.Nano(held), a.Created.UTC(), uint64(seq)
				a.AlertBelow = pricing.Nano(alert)
				return to.Account(a)
			}},
			{`SELECT ` + keyCols + ` FROM keys ORDER BY hash COLLATE "C"`, func(r pgx.Rows) error {
				k, err := scanKey(r)
				if err != nil {
					return err
				}
				return to.Key(k)
			}},
			{`SELECT ` + entryCols + ` FROM journal ORDER BY account COLLATE "C", seq`, func(r pgx.Rows) error {
				e, err := scanEntry(r)
				if err != nil {
					return err
				}
				return to.Entry(e)
			}},
			{`SELECT ` + jobCols + ` FROM jobs ORDER BY request_id COLLATE "C"`, func(r pgx.Rows) error {
				j, err := scanJob(r)
				if err != nil {
					return err
				}
				return to.Job(j)
			}},
			{`SELECT ` + outcomeCols + ` FROM outcomes ORDER BY request_id COLLATE "C"`, func(r pgx.Rows) error {
				o, err := scanOutcome(r)
				if err != nil {
					return err
				}
				return to.Outcome(o)
			}},
			{`SELECT ` + loginCols + ` FROM logins ORDER BY email COLLATE "C"`, func(r pgx.Rows) error {
				l, err := scanLogin(r)
				if err != nil {
					return err
				}
				return to.Login(l)
			}},
		}
		for _, st := range steps {
			rows, err := tx.Query(ctx, st.sql)
			if err != nil {
				return err
			}
			for rows.Next() {
				if err := st.scan(rows); err != nil {
					rows.Close()
					return err
				}
			}
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return mapErr("export", err)
	}
	return nil
}
