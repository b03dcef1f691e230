package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// The ledger's reads: accounts, their charges, and how holds ended.

// Balance returns the account; ErrNotFound if it does not exist.
func (s *Store) Balance(ctx context.Context, account string) (store.Account, error) {
	a, err := scanAccount(s.pool.QueryRow(ctx, `SELECT `+accountCols+` FROM accounts WHERE id = $1`, account))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Account{}, fmt.Errorf("postgres: account %q: %w", account, store.ErrNotFound)
	}
	if err != nil {
		return store.Account{}, mapErr("balance", err)
	}
	return a, nil
}

const accountCols = `id, balance, held, created, alert_below`

func scanAccount(row pgx.Row) (store.Account, error) {
	var (
		a                    store.Account
		balance, held, alert int64
	)
	if err := row.Scan(&a.ID, &balance, &held, &a.Created, &alert); err != nil {
		return store.Account{}, err
	}
	a.Balance, a.Held, a.Created, a.AlertBelow = pricing.Nano(balance), pricing.Nano(held), a.Created.UTC(), pricing.Nano(alert)
	return a, nil
}

// Charges lists the account's journal entries, newest first, at most limit
// (≤ 0 means 100). An unknown account returns ErrNotFound.
func (s *Store) Charges(ctx context.Context, account string, limit int) ([]store.Entry, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT `+entryCols+` FROM journal WHERE account = $1 ORDER BY seq DESC LIMIT $2`, account, limit)
	if err != nil {
		return nil, mapErr("charges", err)
	}
	var out []store.Entry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			rows.Close()
			return nil, mapErr("charges", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("charges", err)
	}
	if len(out) == 0 {
		if _, err := s.Balance(ctx, account); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ListAccounts lists the accounts whose id sorts (bytewise) after after, in
// id order, at most limit (≤ 0 or above store.MaxAccountPage:
// store.MaxAccountPage).
func (s *Store) ListAccounts(ctx context.Context, after string, limit int) ([]store.Account, error) {
	if limit <= 0 || limit > store.MaxAccountPage {
		limit = store.MaxAccountPage
	}
	rows, err := s.pool.Query(ctx, `SELECT `+accountCols+` FROM accounts WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
	if err != nil {
		return nil, mapErr("list accounts", err)
	}
	out := []store.Account{}
	for rows.Next() {
		a, err := scanAccount(rows)
		if err != nil {
			rows.Close()
			return nil, mapErr("list accounts", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("list accounts", err)
	}
	return out, nil
}

// Outcome returns how the hold of requestID ended; ErrNotFound if it is
// still open or never existed.
func (s *Store) Outcome(ctx context.Context, requestID string) (store.Outcome, error) {
	o, err := scanOutcome(s.pool.QueryRow(ctx, `SELECT `+outcomeCols+` FROM outcomes WHERE request_id = $1`, requestID))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Outcome{}, fmt.Errorf("postgres: outcome of %q: %w", requestID, store.ErrNotFound)
	}
	if err != nil {
		return store.Outcome{}, mapErr("outcome", err)
	}
	return o, nil
}

const outcomeCols = `request_id, account, state, hold_amount, charge, seq, owner, reason, time`

func scanOutcome(row pgx.Row) (store.Outcome, error) {
	var (
		o                 store.Outcome
		hold, charge, seq int64
	)
	if err := row.Scan(&o.RequestID, &o.Account, &o.State, &hold, &charge, &seq, &o.Owner, &o.Reason, &o.Time); err != nil {
		return store.Outcome{}, err
	}
	o.HoldAmount, o.Charge, o.Seq, o.Time = pricing.Nano(hold), pricing.Nano(charge), uint64(seq), o.Time.UTC()
	return o, nil
}
