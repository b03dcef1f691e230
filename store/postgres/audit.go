package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// Audit reads the account's journal and holds in one REPEATABLE READ
// snapshot and checks the invariants: the balance equals the journal's sum;
// every entry's balance_after is the running sum; sequence numbers run 1,
// 2, 3 … up to the account's counter; held equals the sum of its open
// holds, and each key's held the sum of the holds counted on it; recovery
// entries move nothing. Problems are in the report.
func (s *Store) Audit(ctx context.Context, account string) (store.AuditReport, error) {
	var r store.AuditReport
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var seq int64
		var balance, held int64
		err := tx.QueryRow(ctx, `SELECT id, balance, held, seq, created FROM accounts WHERE id = $1`, account).
			Scan(&r.Account.ID, &balance, &held, &seq, &r.Account.Created)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("postgres: audit: account %q: %w", account, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		r.Account.Balance, r.Account.Held, r.Account.Created = pricing.Nano(balance), pricing.Nano(held), r.Account.Created.UTC()
		rows, err := tx.Query(ctx, `SELECT seq, kind, amount, balance_after FROM journal WHERE account = $1 ORDER BY seq`, account)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				eseq, amount, after int64
				kind                string
			)
			if err := rows.Scan(&eseq, &kind, &amount, &after); err != nil {
				rows.Close()
				return err
			}
			r.Entries++
			if uint64(eseq) != r.LastSeq+1 {
				r.Problems = append(r.Problems, fmt.Sprintf("entry seq %d follows seq %d", eseq, r.LastSeq))
			}
			r.LastSeq = uint64(eseq)
			r.Journal += pricing.Nano(amount)
			switch kind {
			case store.KindCredit:
				r.Credits += pricing.Nano(amount)
			case store.KindCharge:
				r.Charges -= pricing.Nano(amount)
			case store.KindRefund:
				r.Refunds += pricing.Nano(amount)
			case store.KindRecovery:
				if amount != 0 {
					r.Problems = append(r.Problems, fmt.Sprintf("recovery entry %d moves %d nano-USD", eseq, amount))
				}
			default:
				r.Problems = append(r.Problems, fmt.Sprintf("entry %d has unknown kind %q", eseq, kind))
			}
			if pricing.Nano(after) != r.Journal {
				r.Problems = append(r.Problems, fmt.Sprintf("entry %d: balance_after %d, running sum %d", eseq, after, r.Journal))
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if r.LastSeq != uint64(seq) {
			r.Problems = append(r.Problems, fmt.Sprintf("last entry seq %d, account counter %d", r.LastSeq, seq))
		}
		if r.Journal != r.Account.Balance {
			r.Problems = append(r.Problems, fmt.Sprintf("balance %d, journal sum %d", r.Account.Balance, r.Journal))
		}
		var n int
		var sum int64
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(amount), 0)::bigint FROM holds WHERE account = $1`, account).Scan(&n, &sum); err != nil {
			return err
		}
		r.OpenHolds, r.HeldByHolds = n, pricing.Nano(sum)
		if r.HeldByHolds != r.Account.Held {
			r.Problems = append(r.Problems, fmt.Sprintf("held %d, its holds sum %d", r.Account.Held, r.HeldByHolds))
		}
		return auditKeys(ctx, tx, &r)
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return store.AuditReport{}, err
		}
		return store.AuditReport{}, mapErr("audit", err)
	}
	return r, nil
}

// auditKeys checks that each key of the account holds what its open holds
// counted on it sum to.
func auditKeys(ctx context.Context, tx pgx.Tx, r *store.AuditReport) error {
	rows, err := tx.Query(ctx, `SELECT k.id, k.held, coalesce(sum(h.amount), 0)::bigint FROM keys k
LEFT JOIN holds h ON h.key_id = k.id AND h.keyed AND h.account = k.account
WHERE k.account = $1 GROUP BY k.id, k.held HAVING k.held <> coalesce(sum(h.amount), 0) ORDER BY k.id`, r.Account.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id        string
			held, sum int64
		)
		if err := rows.Scan(&id, &held, &sum); err != nil {
			return err
		}
		r.Problems = append(r.Problems, fmt.Sprintf("key %s: held %d, its holds sum %d", id, held, sum))
	}
	return rows.Err()
}
