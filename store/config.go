package store

import (
	"fmt"
	"os"
	"time"

	"github.com/modelrelay/modelrelay/internal/clip"
)

// Drivers a Config names.
const (
	DriverBadger   = "badger"   // embedded, one process (data_dir)
	DriverPostgres = "postgres" // shared by any number of replicas
)

// DatabaseURLEnv is the environment variable that gives the DSN when the
// configuration does not.
const DatabaseURLEnv = "RELAY_DATABASE_URL"

// Config is the store: section of the configuration. cmd/relay opens the
// store it names.
type Config struct {
	// Driver is DriverBadger (default) or DriverPostgres.
	Driver string `yaml:"driver"`
	// DSN is the PostgreSQL connection string; empty takes
	// $RELAY_DATABASE_URL. Only for postgres.
	DSN string `yaml:"dsn"`
	// MaxConns bounds the connection pool (16).
	MaxConns int32 `yaml:"max_conns"`
	// StatementTimeout bounds each statement on the server (5s).
	StatementTimeout time.Duration `yaml:"statement_timeout"`
	// Lease is how long a replica's hold stays locked without a renewal
	// (30s): the longest a dead replica's holds keep credit reserved.
	Lease time.Duration `yaml:"lease"`
}

// Resolve applies the defaults and checks the values; getenv is os.Getenv
// when nil.
func (c *Config) Resolve(getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	switch c.Driver {
	case "":
		c.Driver = DriverBadger
	case DriverBadger, DriverPostgres:
	default:
		return fmt.Errorf("store.driver: %q is not %q or %q", clip.Text(c.Driver, 64), DriverBadger, DriverPostgres)
	}
	if c.Driver == DriverBadger {
		if c.DSN != "" {
			return fmt.Errorf("store.dsn: set, but store.driver is %q; set store.driver: %s", DriverBadger, DriverPostgres)
		}
		return nil
	}
	if c.DSN == "" {
		c.DSN = getenv(DatabaseURLEnv)
	}
	if c.DSN == "" {
		return fmt.Errorf("store.dsn: required with store.driver: postgres (or set %s)", DatabaseURLEnv)
	}
	if c.MaxConns == 0 {
		c.MaxConns = 16
	}
	if c.MaxConns < 2 {
		return fmt.Errorf("store.max_conns: %d is below 2 (one for calls, one for the lease loop)", c.MaxConns)
	}
	if c.StatementTimeout == 0 {
		c.StatementTimeout = 5 * time.Second
	}
	if c.StatementTimeout < 0 {
		return fmt.Errorf("store.statement_timeout: %s is negative", c.StatementTimeout)
	}
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.Lease < time.Second {
		return fmt.Errorf("store.lease: %s is under 1s", c.Lease)
	}
	return nil
}

// LocalConfig is where this process keeps its files: the top-level
// data_dir and sync_writes keys of the configuration (the embedded store's
// settings, older than the store: section). data_dir also holds the
// plugins' compilation cache by default, whichever driver is used.
type LocalConfig struct {
	// DataDir holds the Badger ledger. Default "./data".
	DataDir string `yaml:"data_dir"`
	// SyncWrites makes every ledger transaction durable on disk (fsync)
	// before the call proceeds. Default false: every transaction is still
	// written to the OS before it commits, so a crash of the process loses
	// nothing (the SIGKILL test proves it); only a power loss or kernel crash
	// can lose the last writes. true costs an fsync per transaction (about
	// 250 hold+settle pairs per second on the reference disk instead of 4,600).
	SyncWrites *bool `yaml:"sync_writes"`
}

// Resolve applies the defaults. It is idempotent and, today, refuses
// nothing: any directory name is tried when the store opens.
func (c *LocalConfig) Resolve() error {
	if c.DataDir == "" {
		c.DataDir = "./data"
	}
	if c.SyncWrites == nil {
		f := false
		c.SyncWrites = &f
	}
	return nil
}
