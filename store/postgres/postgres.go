package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// Isolation. Every statement runs at READ COMMITTED, PostgreSQL's default,
// and every money-moving step is one statement (a data-modifying CTE, or
// relay_hold, a PL/pgSQL function of migration 0003), which PostgreSQL runs
// as one implicit transaction: the account's row, its key's, the hold row,
// the journal entry and the outcome commit together or not at all. READ
// COMMITTED is enough because no step decides on a value it read earlier:
// each conditional UPDATE takes the row's lock and, if the row changed under
// it, re-checks its WHERE clause against the newest committed row
// (PostgreSQL's EvalPlanQual) before writing. So a hold is checked against
// the balance and key spend every other committed step has left, and two
// replicas can never both reserve the same credit or limit. Every statement
// that locks an account's row and a key's locks the account's first (a
// key's spend only changes under its account's lock; UpdateKey locks the
// key alone), so they never deadlock. Settle, Release and recovery each
// begin by deleting the hold row: of two that race, the second blocks on
// the row lock, then finds no row and changes nothing, which makes each
// exactly once. SERIALIZABLE would add retries and give nothing more.
//
// Copies. Import fills an empty database with another store's export
// (store.Exporter; relay store copy gives it a Badger ledger) in one
// transaction, by COPY, keeping ids, hashes, sequence numbers and counters;
// Export reads the books back in the same order, for checking the copy.

// Defaults of Options.
const (
	DefaultMaxConns         = 16
	DefaultLease            = 30 * time.Second
	DefaultStatementTimeout = 5 * time.Second
	DefaultSweepBatch       = 100
	DefaultSettleLinger     = time.Millisecond
	// DefaultConnectTimeout bounds each new connection when the DSN sets
	// no (nonzero) connect_timeout.
	DefaultConnectTimeout = 10 * time.Second
)

const (
	// sweepLock is the key of the session advisory lock a sweep holds, so
	// that one replica sweeps at a time.
	sweepLock int64 = 0x72656c61795f7377 // "relay_sw"
)

// Options configure Open. Zero values take the defaults.
type Options struct {
	// Owner names this replica in the holds it takes (a boot id); empty
	// makes a random one.
	Owner string
	// MaxConns bounds the connection pool (DefaultMaxConns).
	MaxConns int32
	// StatementTimeout bounds each statement on the server
	// (DefaultStatementTimeout); negative means none.
	StatementTimeout time.Duration
	// Lease is how long a hold stays this replica's without a renewal
	// (DefaultLease): a replica that dies leaves holds that any other
	// releases once their lease has run out.
	Lease time.Duration
	// RenewEvery is how often the background loop renews this replica's
	// leases (Lease/3); negative disables the loop (the caller then calls
	// RenewLeases and Sweep itself).
	RenewEvery time.Duration
	// SweepEvery is how often the background loop sweeps expired holds
	// (Lease/2).
	SweepEvery time.Duration
	// SweepBatch is how many holds a sweep releases per round
	// (DefaultSweepBatch).
	SweepBatch int
	// SettleLinger is how long a Settle that finds no batch of its
	// account in flight, while other calls of the account are running
	// here, waits for their holds or settles to share its commit
	// (DefaultSettleLinger); the next hold of the account takes it along
	// at once. Negative sends it at once. The gateway settles after the
	// client has its answer, so the wait costs the client nothing, and
	// fewer commits hold the account's row less often. A settle with no
	// other call of its account running goes at once.
	SettleLinger time.Duration
	Logger       *slog.Logger
}

// PostgreSQL is a store.Store, and a store.Allotter, whose allotments the
// gateway finds by type assertion (its Exporter guard is in export.go).
var (
	_ store.Store    = (*Store)(nil)
	_ store.Allotter = (*Store)(nil)
)

// Store is the ledger in PostgreSQL.
type Store struct {
	dsn        string
	pool       *pgxpool.Pool
	owner      string
	lease      time.Duration
	sweepBatch int
	log        *slog.Logger
	// opTimeout bounds a batch of holds and settles (see batch.go);
	// zero means none.
	opTimeout time.Duration
	batch     batcher
	// settleLinger is how long a settle that finds its account idle
	// waits for others to share its batch.
	settleLinger time.Duration

	// live are the request ids of the holds this replica's calls own, the
	// only ones RenewLeases renews (see holds.go), with their accounts;
	// liveOn counts them per account.
	liveMu sync.Mutex
	live   map[string]liveHold
	liveOn map[string]int

	// pingConn is Ping's own connection, made on first use and again after
	// it broke; pingClosed is set by Close. Both are the holder's of
	// pingTurn, a one-slot semaphore.
	pingTurn   chan struct{}
	pingConn   *pgx.Conn
	pingClosed bool

	stop chan struct{}
	done sync.WaitGroup
	once sync.Once
}

// setDefaults fills o's zero values with the defaults.
func (o *Options) setDefaults() error {
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.StatementTimeout == 0 {
		o.StatementTimeout = DefaultStatementTimeout
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.RenewEvery == 0 {
		o.RenewEvery = o.Lease / 3
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = o.Lease / 2
	}
	if o.SettleLinger == 0 {
		o.SettleLinger = DefaultSettleLinger
	}
	if o.SweepBatch <= 0 {
		o.SweepBatch = DefaultSweepBatch
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Owner == "" {
		var err error
		if o.Owner, err = randomOwner(); err != nil {
			return err
		}
	}
	return nil
}

// Open connects to dsn, migrates the schema (under an advisory lock, so
// replicas starting together migrate once; a newer schema is refused with
// ErrSchemaNewer) and starts the lease loop unless opts.RenewEvery < 0.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: dsn: %w", err)
	}
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	cfg.MaxConns = opts.MaxConns
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// A server that takes the connection and never answers must not
		// hold a new connection, or relay serve's start, for as long as
		// TCP would: a nonzero connect_timeout in the DSN overrides this
		// (zero, pgx's "none", cannot be told from unset).
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.StatementTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(opts.StatementTimeout.Milliseconds(), 10)
	}
	// Every statement on a call's path finds its rows by key. The server
	// plans a prepared statement generically after a few runs, and a
	// generic plan made while holds is nearly empty (it is: a hold lives
	// for one call) scans it sequentially from then on, reading every
	// dead row its churn leaves between vacuums: aged a million calls,
	// gateway-pg answered a fifth of what it did fresh. With sequential
	// scans priced out, the plans use the indexes; a read with no index to
	// use (an audit's sum, an export) still scans, which is its only plan.
	if _, set := cfg.ConnConfig.RuntimeParams["enable_seqscan"]; !set {
		cfg.ConnConfig.RuntimeParams["enable_seqscan"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: pool: %w", err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		pool.Close()
		return nil, mapErr("connect", err)
	}
	applied, err := migrate(ctx, conn.Conn())
	if err == nil {
		warnNoAutovacuum(ctx, conn.Conn(), opts.Logger)
	}
	conn.Release()
	if err != nil {
		pool.Close()
		return nil, err
	}
	if len(applied) > 0 {
		opts.Logger.Info("postgres: schema migrated", "versions", applied)
	}
	s := &Store{dsn: dsn, pool: pool, owner: opts.Owner, lease: opts.Lease, sweepBatch: opts.SweepBatch, log: opts.Logger, live: map[string]liveHold{}, liveOn: map[string]int{}, stop: make(chan struct{}), pingTurn: make(chan struct{}, 1)}
	s.batch.lanes = map[string]*lane{}
	if opts.SettleLinger > 0 {
		s.settleLinger = opts.SettleLinger
	}
	if opts.StatementTimeout > 0 {
		s.opTimeout = 2*opts.StatementTimeout + 5*time.Second
	}
	if opts.RenewEvery > 0 {
		s.done.Add(1)
		go s.loop(opts.RenewEvery, opts.SweepEvery)
	}
	return s, nil
}

// warnNoAutovacuum warns when the server runs without autovacuum: every
// call inserts a hold row and deletes it, so holds (and the accounts' rows,
// updated twice per call) fill with dead rows that scans wade through.
func warnNoAutovacuum(ctx context.Context, conn *pgx.Conn, log *slog.Logger) {
	var on string
	if err := conn.QueryRow(ctx, `SELECT current_setting('autovacuum')`).Scan(&on); err != nil || on == "on" {
		return
	}
	log.Warn("postgres: autovacuum is off on this server: the holds table, a row inserted and deleted per call, fills with dead rows and its scans slow down; turn autovacuum on, or VACUUM holds and accounts regularly")
}

// Owner is this replica's name in the holds it takes.
func (s *Store) Owner() string { return s.owner }

// Ping reports whether the database answers (for readiness checks), on a
// connection of its own rather than the pool's: a replica whose every pooled
// connection is busy serving calls is loaded, not unready, and a probe that
// queued for the pool would take it out of its load balancer just when it
// is needed most. Concurrent probes take turns, each waiting no longer than
// its ctx allows.
func (s *Store) Ping(ctx context.Context) error {
	select {
	case s.pingTurn <- struct{}{}:
		defer func() { <-s.pingTurn }()
	case <-ctx.Done():
		return mapErr("ping", ctx.Err())
	}
	if s.pingClosed {
		return errors.New("postgres: ping: the store is closed")
	}
	// A kept connection that broke (the server restarted since) gets one
	// fresh try at once: the server may well be back.
	for kept := s.pingConn != nil; ; kept = false {
		if s.pingConn == nil {
			c, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
			if err != nil {
				return mapErr("ping", err)
			}
			s.pingConn = c
		}
		err := s.pingConn.Ping(ctx)
		if err == nil {
			return nil
		}
		if !s.pingConn.IsClosed() { // nothing was sent: ctx had run out
			return mapErr("ping", err)
		}
		s.pingConn = nil
		if !kept || ctx.Err() != nil {
			return mapErr("ping", err)
		}
	}
}

// Close stops the lease loop and closes the pool. Holds still open stay in
// the database until their lease runs out and another replica sweeps them.
func (s *Store) Close() error {
	s.once.Do(func() {
		close(s.stop)
		s.done.Wait()
		s.pool.Close()
		s.pingTurn <- struct{}{}
		s.pingClosed = true
		if s.pingConn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = s.pingConn.Close(ctx)
			cancel()
		}
		<-s.pingTurn
	})
	return nil
}

func (s *Store) loop(renew, sweep time.Duration) {
	defer s.done.Done()
	rt, st := time.NewTicker(renew), time.NewTicker(sweep)
	defer rt.Stop()
	defer st.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-rt.C:
			ctx, cancel := context.WithTimeout(context.Background(), renew)
			if _, err := s.RenewLeases(ctx); err != nil {
				s.log.Warn("postgres: renewing hold leases failed", "err", err)
			}
			cancel()
		case <-st.C:
			ctx, cancel := context.WithTimeout(context.Background(), sweep)
			if _, err := s.Sweep(ctx); err != nil {
				s.log.Warn("postgres: sweeping expired holds failed", "err", err)
			}
			cancel()
		}
	}
}

// ErrUnavailable wraps the errors of a database that is down, unreachable,
// shutting down or too slow (a statement timeout): the caller answers 503
// and tries again later. Every money step is one statement, so such an
// error leaves nothing half-written; a Settle whose commit was lost with the
// connection is safe to repeat (a replay answers ErrAlreadySettled).
var ErrUnavailable = store.ErrUnavailable

// mapErr turns PostgreSQL's constraint violations into the store's errors,
// and an unreachable or failing server into ErrUnavailable.
func mapErr(what string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "23505": // unique_violation
			return fmt.Errorf("postgres: %s: %w", what, store.ErrExists)
		case pe.Code == "23503": // foreign_key_violation: the account does not exist
			return fmt.Errorf("postgres: %s: account: %w", what, store.ErrNotFound)
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "57P"), // admin shutdown, crash shutdown, cannot connect now
			pe.Code == "57014",                // query_canceled: the statement timeout
			pe.Code == "53300",                // too_many_connections
			isConflict(err):                   // a deadlock or serialization failure that outlasted conflictTries
			return fmt.Errorf("postgres: %s: %w: %w", what, ErrUnavailable, err)
		}
		return fmt.Errorf("postgres: %s: %w", what, err)
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) || isNetErr(err) {
		return fmt.Errorf("postgres: %s: %w: %w", what, ErrUnavailable, err)
	}
	return fmt.Errorf("postgres: %s: %w", what, err)
}

// isConflict reports a deadlock or a serialization failure: the server
// rolled the statement back whole, and running it again is safe.
func isConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// conflictTries is how many times runOne sends a statement that meets a
// conflict (isConflict) before it answers with it, as ErrUnavailable.
const conflictTries = 3

// detach is ctx without its cancellation, for a step that must not stop
// half-way because its caller went away (a settle, a release, a refund),
// but still bounded by opTimeout: a database that stops answering without
// closing the connection fails it as unavailable instead of holding a pool
// connection and its goroutine until TCP gives up.
func (s *Store) detach(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = context.WithoutCancel(ctx)
	if s.opTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.opTimeout)
}

// NotUpYet reports whether an Open that failed with err may succeed later
// with nothing changed: the server refused or dropped the connection, its
// name did not resolve (a name not yet in DNS, or mistyped: the caller's
// log says which it waits for), it did not answer in time, it is starting
// up, shutting down or full, or no primary was found yet. A TLS failure, a
// wrong password or a missing database is not: trying again changes
// nothing.
func NotUpYet(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P") || pe.Code == "53300"
	}
	var dns *net.DNSError
	var op *net.OpError
	return errors.As(err, &dns) || (errors.As(err, &op) && op.Op == "dial") ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		// A failover under way: target_session_attrs found no primary yet.
		errors.Is(err, pgconn.ErrReadOnlyConnection) || errors.Is(err, pgconn.ErrStandbyConnection)
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// stamp is t in UTC at the microsecond PostgreSQL keeps; zero means now.
func stamp(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Truncate(time.Microsecond)
}

func usageJSON(u pricing.Usage) ([]byte, error) { return json.Marshal(u) }

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
