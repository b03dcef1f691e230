package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// Generation is the ended call requestID of account: its outcome, with the
// usage, key, model, route and endpoint of its journal entry (a charge or a
// recovery), or of the outcome itself for a released call, which has no
// entry. ErrNotFound if the call is open, unknown or another account's.
func (s *Store) Generation(ctx context.Context, account, requestID string) (store.Generation, error) {
	var (
		g                   store.Generation
		hold, charge        int64
		usage               []byte
		keyID, model, route *string
		endpoint            *string
	)
	err := s.pool.QueryRow(ctx, `
SELECT o.request_id, o.account, o.state, o.hold_amount, o.charge, o.reason, o.time,
	coalesce(j.key_id, o.key_id), coalesce(j.model, o.model), coalesce(j.route, o.route), coalesce(j.endpoint, o.endpoint), j.usage
FROM outcomes o LEFT JOIN journal j ON o.seq > 0 AND j.account = o.account AND j.seq = o.seq
WHERE o.request_id = $1 AND o.account = $2`, requestID, account).
		Scan(&g.RequestID, &g.Account, &g.State, &hold, &charge, &g.Note, &g.Time, &keyID, &model, &route, &endpoint, &usage)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Generation{}, fmt.Errorf("postgres: generation %q of account %q: %w", requestID, account, store.ErrNotFound)
	}
	if err != nil {
		return store.Generation{}, mapErr("generation", err)
	}
	if len(usage) > 0 {
		if err := json.Unmarshal(usage, &g.Usage); err != nil {
			return store.Generation{}, fmt.Errorf("postgres: generation %q: usage: %w", requestID, err)
		}
	}
	g.KeyID, g.Model, g.Route, g.Endpoint = deref(keyID), deref(model), deref(route), deref(endpoint)
	g.HoldAmount, g.Charge, g.Time = pricing.Nano(hold), pricing.Nano(charge), g.Time.UTC()
	g.Estimated = g.State == store.OutcomeSettled && store.Estimated(g.Note)
	return g, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Journal calls fn with the account's entries whose time is in [from, to),
// in sequence order, streamed from one statement (by the index on account
// and time); fn's error stops it and is returned. ErrNotFound for an
// unknown account.
func (s *Store) Journal(ctx context.Context, account string, from, to time.Time, fn func(store.Entry) error) error {
	rows, err := s.pool.Query(ctx, `SELECT `+entryCols+` FROM journal WHERE account = $1 AND time >= $2 AND time < $3 ORDER BY seq`,
		account, from.UTC(), to.UTC())
	if err != nil {
		return mapErr("journal", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return mapErr("journal", err)
		}
		n++
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return mapErr("journal", err)
	}
	if n == 0 {
		if _, err := s.Balance(ctx, account); err != nil {
			return err
		}
	}
	return nil
}

// SetAlert sets the account's low-balance threshold (0: none) and returns
// the account; ErrNotFound if it does not exist.
func (s *Store) SetAlert(ctx context.Context, account string, below pricing.Nano) (store.Account, error) {
	if below < 0 {
		return store.Account{}, fmt.Errorf("postgres: account %q: alert threshold %d nano-USD is negative", account, below)
	}
	a, err := scanAccount(s.pool.QueryRow(ctx, `UPDATE accounts SET alert_below = $2 WHERE id = $1 RETURNING `+accountCols,
		account, int64(below)))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Account{}, fmt.Errorf("postgres: account %q: %w", account, store.ErrNotFound)
	}
	if err != nil {
		return store.Account{}, mapErr("set alert", err)
	}
	return a, nil
}

// AccountsBelowAlert counts the accounts whose available credit (balance
// − holds) is under their threshold, reading only the accounts that have
// one (a partial index).
func (s *Store) AccountsBelowAlert(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM accounts WHERE alert_below > 0 AND balance - held < alert_below`).Scan(&n)
	if err != nil {
		return 0, mapErr("accounts below alert", err)
	}
	return n, nil
}
