package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrateLock is the key of the transaction-level advisory lock migrations
// run under, so that replicas starting together migrate once.
const migrateLock int64 = 0x72656c61795f6d67 // "relay_mg"

// ErrSchemaNewer is returned when the database's schema is newer than this
// build knows: an older binary must not write to books it does not understand.
var ErrSchemaNewer = errors.New("database schema is newer than this build")

type migration struct {
	version int
	name    string
	sql     string
}

// migrations lists the embedded migrations in version order. Each file is
// NNNN_name.sql; versions run 1, 2, 3 … without gaps.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, n := range names {
		base := strings.TrimPrefix(n, "migrations/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("postgres: migration %q is not named NNNN_name.sql", base)
		}
		b, err := migrationFS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("postgres: migration %q: expected version %d", m.name, i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the newest schema version this build knows.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// Migrate brings the database at dsn to this build's schema and returns the
// versions it applied (none when it was current). It is what Open does
// first, and what `relay migrate` runs alone.
func Migrate(ctx context.Context, dsn string) ([]int, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return migrate(ctx, conn)
}

// migrate applies the missing migrations in one transaction under a
// transaction-level advisory lock: a second replica waits on the lock, then
// finds the versions recorded and applies nothing. A database whose recorded
// version is above this build's is refused with ErrSchemaNewer.
func migrate(ctx context.Context, conn *pgx.Conn) (applied []int, err error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if _, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLock); err != nil {
		return nil, fmt.Errorf("postgres: migrate: lock: %w", err)
	}
	if _, err = tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS relay_schema (
		version integer PRIMARY KEY,
		name    text NOT NULL,
		applied timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	var current int
	if err = tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM relay_schema`).Scan(&current); err != nil {
		return nil, fmt.Errorf("postgres: migrate: read version: %w", err)
	}
	if known := len(ms); current > known {
		err = fmt.Errorf("postgres: the database is at schema version %d, this build knows up to %d: run a newer relay (%w)", current, known, ErrSchemaNewer)
		return nil, err
	}
	for _, m := range ms[current:] {
		if _, err = tx.Exec(ctx, m.sql); err != nil {
			return nil, fmt.Errorf("postgres: migration %s: %w", m.name, err)
		}
		if _, err = tx.Exec(ctx, `INSERT INTO relay_schema (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			return nil, fmt.Errorf("postgres: migration %s: %w", m.name, err)
		}
		applied = append(applied, m.version)
	}
	if err = tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("postgres: migrate: commit: %w", err)
	}
	return applied, nil
}
