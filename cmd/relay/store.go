package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/store/badger"
	"github.com/modelrelay/modelrelay/store/postgres"
)

// openStore opens the store the configuration names (its store: section,
// and data_dir and sync_writes for Badger) and releases the holds left by
// processes that ended: Badger's, all those of earlier processes on its
// directory; PostgreSQL's, those whose lease has run out (the store's own
// loop renews this replica's leases and sweeps from then on).
func openStore(ctx context.Context, cfg store.Config, local store.LocalConfig, log *slog.Logger) (store.Store, error) {
	var (
		st  store.Store
		err error
	)
	switch cfg.Driver {
	case store.DriverPostgres:
		st, err = openPostgres(ctx, cfg, log)
		if err != nil {
			return nil, fmt.Errorf("open the PostgreSQL store: %w", err)
		}
	default:
		if err := os.MkdirAll(local.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
		st, err = badger.Open(filepath.Join(local.DataDir, "ledger"), badger.Options{SyncWrites: *local.SyncWrites, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open ledger in %s: %w", local.DataDir, err)
		}
	}
	n, err := st.RecoverHolds(ctx)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("recover holds: %w", err)
	}
	if n > 0 {
		log.Warn("released holds left by a process that ended", "holds", n)
	}
	log.Info("store open", "driver", cfg.Driver, "owner", st.Owner())
	return st, nil
}

// Bounds of openPostgres's waits for a database that does not answer yet.
const (
	dbWaitMin = 250 * time.Millisecond
	dbWaitMax = 5 * time.Second
)

// openPostgres opens the PostgreSQL store, waiting for a database that does
// not answer yet (started at the same time, restarting, its address not yet
// resolvable: postgres.NotUpYet) instead of exiting: it tries again with
// backoff, dbWaitMin up to dbWaitMax, logging each failure, until the
// database answers or the process is told to stop. Any other error — a
// wrong password, TLS that fails, a schema newer than this build — ends it
// at once. Each try's connection is bounded by the DSN's connect_timeout
// (postgres.DefaultConnectTimeout when it sets none).
func openPostgres(ctx context.Context, cfg store.Config, log *slog.Logger) (*postgres.Store, error) {
	opts := postgres.Options{
		MaxConns:         cfg.MaxConns,
		StatementTimeout: cfg.StatementTimeout,
		Lease:            cfg.Lease,
		Logger:           log,
	}
	for wait := dbWaitMin; ; wait = min(2*wait, dbWaitMax) {
		st, err := postgres.Open(ctx, cfg.DSN, opts)
		if err == nil || !postgres.NotUpYet(err) {
			return st, err
		}
		log.Warn("the database does not answer yet; waiting for it", "retry_in", wait.String(), "error", err.Error())
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
}

// runMigrate brings the PostgreSQL store of the configuration (or -dsn) to
// this build's schema, alone: what relay serve does at start, under the same
// lock.
func runMigrate(args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	path := fs.String("config", "relay.yaml", "configuration file (its store: section)")
	dsn := fs.String("dsn", "", "PostgreSQL connection string; overrides the configuration and "+store.DatabaseURLEnv)
	if err := fs.Parse(args); err != nil {
		return exitCode(2)
	}
	if *dsn == "" {
		*dsn = os.Getenv(store.DatabaseURLEnv)
	}
	if *dsn == "" {
		cfg, err := config.Load(*path)
		if err != nil {
			return err
		}
		if cfg.Store.Driver != store.DriverPostgres {
			return fmt.Errorf("migrate: %s uses store.driver %q; only postgres has migrations (or pass -dsn)", *path, cfg.Store.Driver)
		}
		*dsn = cfg.Store.DSN
	}
	applied, err := postgres.Migrate(context.Background(), *dsn)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Printf("schema is current (version %d)\n", postgres.SchemaVersion())
		return nil
	}
	fmt.Printf("applied schema versions %v; now at version %d\n", applied, postgres.SchemaVersion())
	return nil
}
