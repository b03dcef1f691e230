package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// RenewLeases extends the lease of the holds this replica's calls own to
// now + Lease (the database's clock) and returns how many it renewed. The
// background loop calls it every RenewEvery; a gateway that disabled the
// loop calls it itself, more often than Lease.
//
// A hold is this replica's to renew from its Hold until a Settle that does
// not fail for an unavailable database, or a Release, whatever it answers.
// A hold whose Hold reported an error is never renewed, even if it landed
// (the database committed it and the answer was lost with the connection):
// its call was refused and nothing will end it, so its lease runs out and a
// sweep releases it, uncharged, instead of this replica keeping its credit
// reserved for as long as it runs.
//
// A renewal never waits for a lock while it holds another, so it cannot
// deadlock: it first renews, in one statement, every row no other statement
// has locked (SKIP LOCKED); waiting for those locks in that statement would
// take them in an order a batch of settles does not. A row it skipped is
// mostly a settle's, which deletes it; but a settle can roll back and leave
// a live hold, which must not miss renewal after renewal until its lease
// runs out. So a skipped row whose lease is half gone (skipped last time
// too) is then renewed on its own, one statement per row, which waits for
// the row's lock holding nothing else (renewAtRisk).
func (s *Store) RenewLeases(ctx context.Context) (int64, error) {
	ids := s.liveIDs()
	if len(ids) == 0 {
		return 0, nil
	}
	rows, err := s.pool.Query(ctx, `UPDATE holds SET lease_until = now() + $2::bigint * interval '1 millisecond'
WHERE request_id IN (SELECT request_id FROM holds WHERE owner = $1 AND request_id = ANY($3::text[]) FOR UPDATE SKIP LOCKED)
RETURNING request_id`, s.owner, s.lease.Milliseconds(), ids)
	if err != nil {
		return 0, mapErr("renew leases", err)
	}
	renewed := make(map[string]bool, len(ids))
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { renewed[id] = true; return nil }); err != nil {
		return 0, mapErr("renew leases", err)
	}
	skipped := ids[:0]
	for _, id := range ids {
		if !renewed[id] {
			skipped = append(skipped, id)
		}
	}
	n, err := s.renewAtRisk(ctx, skipped)
	return int64(len(renewed)) + n, err
}

// renewAtRisk renews, each in a statement of its own that waits for the
// row's lock, those of the skipped holds whose lease has less than half
// left. Which those are is read without locking: a hold whose Hold is
// still on its way (a live id with no row yet) or whose row a settle has
// just deleted costs nothing more.
func (s *Store) renewAtRisk(ctx context.Context, skipped []string) (int64, error) {
	if len(skipped) == 0 {
		return 0, nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, mapErr("renew leases", err)
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, `SELECT request_id FROM holds WHERE owner = $1 AND request_id = ANY($3::text[])
AND lease_until < now() + ($2::bigint / 2) * interval '1 millisecond'`, s.owner, s.lease.Milliseconds(), skipped)
	if err != nil {
		return 0, mapErr("renew leases", err)
	}
	atRisk, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, mapErr("renew leases", err)
	}
	var n int64
	for _, id := range atRisk {
		tag, err := conn.Exec(ctx, `UPDATE holds SET lease_until = now() + $2::bigint * interval '1 millisecond' WHERE owner = $1 AND request_id = $3`,
			s.owner, s.lease.Milliseconds(), id)
		if err != nil {
			return n, mapErr("renew leases", err)
		}
		n += tag.RowsAffected()
	}
	return n, nil
}

// liveHold is a hold this replica renews: its account, and whether it is
// an allotment (which liveCount does not count: it is no call).
type liveHold struct {
	account   string
	allotment bool
}

// addLive makes requestID's hold (of account) this replica's to renew;
// false if it already was.
func (s *Store) addLive(requestID, account string, allotment bool) bool {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if _, ok := s.live[requestID]; ok {
		return false
	}
	s.live[requestID] = liveHold{account: account, allotment: allotment}
	if !allotment {
		s.liveOn[account]++
	}
	return true
}

func (s *Store) dropLive(requestID string) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	l, ok := s.live[requestID]
	if !ok {
		return
	}
	delete(s.live, requestID)
	if l.allotment {
		return
	}
	if s.liveOn[l.account]--; s.liveOn[l.account] <= 0 {
		delete(s.liveOn, l.account)
	}
}

// liveCount is how many of account's holds this replica's calls own
// (allotments are not counted).
func (s *Store) liveCount(account string) int {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	return s.liveOn[account]
}

func (s *Store) liveIDs() []string {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	ids := make([]string, 0, len(s.live))
	for id := range s.live {
		ids = append(ids, id)
	}
	return ids
}

// Sweep releases the holds whose lease has expired (their owner died or
// lost the database for longer than the lease), each with a KindRecovery
// journal entry (amount 0, never charged) and an outcome in state
// store.OutcomeRecovered, and returns how many it released. One replica
// sweeps at a time: a sweep holds a session advisory lock, and a replica
// that cannot take it returns 0 at once. The sweep works in batches of
// SweepBatch, each hold in its own short statement, so that it never holds
// an account's row for longer than one hold's release.
func (s *Store) Sweep(ctx context.Context) (released int, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, mapErr("sweep", err)
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, sweepLock).Scan(&got); err != nil {
		return 0, mapErr("sweep: lock", err)
	}
	if !got {
		return 0, nil
	}
	defer func() {
		uctx, cancel := s.detach(ctx)
		defer cancel()
		if _, uerr := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, sweepLock); uerr != nil {
			// The lock is the session's: a connection that cannot say it
			// lets go must not go back to the pool holding it.
			_ = conn.Conn().Close(uctx)
		}
	}()
	for {
		cands, err := s.expiredHolds(ctx, conn)
		if err != nil {
			return released, err
		}
		before := released
		for _, c := range cands {
			ok, err := s.releaseExpired(ctx, conn, c)
			if err != nil {
				return released, err
			}
			if ok {
				released++
			}
		}
		// A short batch was the last; a full one that released nothing
		// (every hold in it ended or was renewed meanwhile) ends the
		// sweep too, to be taken up by the next.
		if len(cands) < s.sweepBatch || released == before {
			return released, nil
		}
	}
}

// expiredHold is a hold a sweep found with its lease run out.
type expiredHold struct{ id, owner string }

// expiredHolds reads the next batch of holds whose lease has run out,
// longest expired first.
func (s *Store) expiredHolds(ctx context.Context, conn *pgxpool.Conn) ([]expiredHold, error) {
	var cands []expiredHold
	rows, err := conn.Query(ctx, `SELECT request_id, owner FROM holds WHERE lease_until < now() ORDER BY lease_until LIMIT $1`, s.sweepBatch)
	if err != nil {
		return nil, mapErr("sweep", err)
	}
	for rows.Next() {
		var c expiredHold
		if err := rows.Scan(&c.id, &c.owner); err != nil {
			rows.Close()
			return nil, mapErr("sweep", err)
		}
		cands = append(cands, c)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("sweep", err)
	}
	return cands, nil
}

// releaseExpired releases one expired hold with its recovery entry and
// outcome, in one statement. The lease is checked again as the row is
// deleted: a hold renewed, settled or released since expiredHolds read it
// is left alone (its DELETE finds no row), and ok is false.
func (s *Store) releaseExpired(ctx context.Context, conn *pgxpool.Conn, c expiredHold) (ok bool, err error) {
	var (
		account string
		amount  int64
	)
	err = conn.QueryRow(ctx, releaseExpiredSQL, c.id, store.ClipNote(store.RecoveryNote(c.owner))).Scan(&account, &amount)
	if err != nil {
		if isNoRows(err) {
			return false, nil
		}
		return false, mapErr(fmt.Sprintf("sweep: hold %q", c.id), err)
	}
	s.log.Info("postgres: released a hold whose lease expired",
		"request_id", c.id, "account", account, "hold_nano", pricing.Nano(amount), "owner", c.owner)
	return true, nil
}

// releaseExpiredSQL deletes hold $1 if its lease has run out, takes its
// amount off the account's and the key's held, and records a recovery
// journal entry and outcome with note $2.
const releaseExpiredSQL = `
WITH h AS (
	DELETE FROM holds WHERE request_id = $1 AND lease_until < now() RETURNING *),
a AS (
	UPDATE accounts acc SET held = acc.held - h.amount, seq = acc.seq + 1
	FROM h WHERE acc.id = h.account
	RETURNING acc.id, acc.balance, acc.seq),
k AS (
	UPDATE keys SET held = keys.held - h.amount FROM h, a WHERE h.keyed AND keys.id = h.key_id),
j AS (
	INSERT INTO journal (account, seq, kind, request_id, key_id, model, route, endpoint, hold_amount, amount, balance_after, note)
	SELECT a.id, a.seq, 'recovery', h.request_id, h.key_id, h.model, h.route, h.endpoint, h.amount, 0, a.balance, $2::text FROM a, h),
o AS (
	INSERT INTO outcomes (request_id, account, state, hold_amount, seq, owner, reason)
	SELECT h.request_id, h.account, 'recovered', h.amount, a.seq, h.owner, $2::text FROM h, a
	ON CONFLICT (request_id) DO NOTHING)
SELECT h.account, h.amount FROM h`

// RecoverHolds releases the holds whose owners let their lease expire: a
// sweep, run once at start-up before serving (the background loop sweeps
// after that). Holds whose lease is still running are left to their owner.
func (s *Store) RecoverHolds(ctx context.Context) (int, error) { return s.Sweep(ctx) }

// OpenHolds lists every open hold of every replica, oldest first.
func (s *Store) OpenHolds(ctx context.Context) ([]store.Hold, error) {
	rows, err := s.pool.Query(ctx, `SELECT request_id, account, key_id, model, route, endpoint, amount, created, owner FROM holds ORDER BY created, request_id`)
	if err != nil {
		return nil, mapErr("open holds", err)
	}
	defer rows.Close()
	var out []store.Hold
	for rows.Next() {
		var (
			h      store.Hold
			amount int64
		)
		if err := rows.Scan(&h.RequestID, &h.Account, &h.KeyID, &h.Model, &h.Route, &h.Endpoint, &amount, &h.Created, &h.Owner); err != nil {
			return nil, mapErr("open holds", err)
		}
		h.Amount, h.Created = pricing.Nano(amount), h.Created.UTC()
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("open holds", err)
	}
	return out, nil
}

// HeldTotal sums the open holds of account ("" sums every account's).
func (s *Store) HeldTotal(ctx context.Context, account string) (pricing.Nano, error) {
	var sum int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(amount), 0)::bigint FROM holds WHERE $1 = '' OR account = $1`, account).Scan(&sum)
	if err != nil {
		return 0, mapErr("held total", err)
	}
	return pricing.Nano(sum), nil
}
