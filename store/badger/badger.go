package badger

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/modelrelay/modelrelay/store"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// # Memory
//
// Open sizes badger for records of a few hundred bytes and a gateway
// within 200 MB: two 8 MB memtables (each a Go-heap arena plus a log file
// mapped at twice its size), level-0 compaction at 2 tables and a write
// stall at 8, 1 MB base tables and two compactors (table builders take
// Go-heap buffers of twice the table size, and badger pools up to eight),
// no block cache (it holds only decompressed or decrypted blocks; ours are
// neither and are read in place from the mapped tables), no index cache
// (used only for encrypted tables) and 16 MB value log files. Badger writes
// new tables through a shared mapping, so a new table is wholly in the
// resident set; on Linux a store on disk unmaps each table's data blocks
// from the process's page tables within about 10 s of the table joining the
// levels (tables_linux.go), leaving them in the page cache, and a later read
// maps what it reads again.
// BenchmarkLedgerRSS measures a run of 200,000 calls.

// Options configures Open. The zero value opens a durable-enough
// store on disk with a random owner and badger's messages at debug level on
// slog.Default().
type Options struct {
	// SyncWrites fsyncs every commit before it returns. Off (the default),
	// a machine crash may lose the last moments of commits; a process crash
	// loses nothing, because badger writes to its log before it answers.
	SyncWrites bool
	// InMemory keeps everything in memory and ignores dir (demo and tests).
	InMemory bool
	// Logger receives badger's own messages: errors at error level, the rest
	// at debug level. Nil means slog.Default().
	Logger *slog.Logger
	// Owner is this process's boot id, written on every hold it takes, so
	// that the recovery of a hold it leaves names it. "" means a random id.
	Owner string

	// releaseEvery is how often the tables' data blocks are released from
	// the resident set (tables_linux.go): 0 means tableReleaseEvery, and a
	// negative duration never (tests that release by hand).
	releaseEvery time.Duration
}

// maxConflictAttempts bounds how often one operation retries a transaction
// that badger refused with ErrConflict. Within one process the per-account
// stripes make conflicts on the same account impossible, so retries only
// happen between operations on different accounts that touch one shared key
// (a request id reused across accounts, a key id), which settle in one or two
// rounds.
const maxConflictAttempts = 64

// badgerMemTableSize is the size of one memtable (Open keeps two).
const badgerMemTableSize = 8 << 20

// stripeCount is the number of per-account mutexes.
const stripeCount = 256

// Badger is the embedded store: Ledger, Keys and Jobs on one badger
// database. It is safe for concurrent use. One directory belongs to one
// process at a time (badger locks it).
type Store struct {
	db      *badger.DB
	owner   string
	log     *slog.Logger
	stripes [stripeCount]sync.Mutex // by account: see lock
	mem     memory                  // accounts as Hold sees them, and the open holds
	holdLog *holdLog                // the open holds, for the next process should this one crash

	closed    atomic.Bool // Close has begun: Hold refuses
	closeOnce sync.Once
	closeErr  error

	releaseStop chan struct{} // nil: no table release loop (in memory)
	releaseDone chan struct{}
}

// tableReleaseEvery is how often the data blocks of the ledger's tables are
// released from the resident set (tables_linux.go): at 1,000 calls a second
// a memtable becomes a table every 10–20 s.
const tableReleaseEvery = 10 * time.Second

// tableRange is the part of a table's mapping releaseTables advised.
type tableRange struct {
	start, end uint64
	path       string
}

// errReleaseUnsupported: releaseTables cannot work here.
var errReleaseUnsupported = errors.New("store: releasing the ledger's tables from memory needs Linux")

var (
	_ store.Ledger = (*Store)(nil)
	_ store.Keys   = (*Store)(nil)
	_ store.Jobs   = (*Store)(nil)
)

// ErrLocked is returned by Open when another process, or another Store in
// this one, has the directory open: badger locks it.
var ErrLocked = errors.New("the ledger is in use by another process")

// isLocked reports whether err is badger's refusal of a directory whose
// lock another holder has.
func isLocked(err error) bool {
	return errors.Is(err, syscall.EWOULDBLOCK) || strings.Contains(err.Error(), "Cannot acquire directory lock")
}

// Open opens (creating if needed) the store in dir. Call RecoverHolds
// once after opening and before serving, to resolve the holds a previous
// process left open.
func Open(dir string, opts Options) (*Store, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if !opts.InMemory && dir == "" {
		return nil, errors.New("store: open badger: dir is empty and InMemory is false")
	}
	owner, err := ownerID(opts.Owner)
	if err != nil {
		return nil, err
	}
	db, err := badger.Open(badgerOptions(dir, opts, logger))
	if err != nil {
		if isLocked(err) {
			return nil, fmt.Errorf("store: open badger in %q: %w (is a relay serve running on it?): %v", dir, ErrLocked, err)
		}
		return nil, fmt.Errorf("store: open badger in %q: %w", dir, err)
	}
	logDir := ""
	if !opts.InMemory {
		logDir = filepath.Join(dir, holdLogDir)
	}
	hl, err := openHoldLog(logDir, opts.SyncWrites)
	if err != nil {
		db.Close()
		return nil, err
	}
	b := &Store{db: db, owner: owner, log: logger, holdLog: hl}
	b.mem.init()
	if every := cmp.Or(opts.releaseEvery, tableReleaseEvery); !opts.InMemory && every > 0 {
		// /proc/self/maps names a mapped file by its real path.
		real, err := filepath.Abs(dir)
		if err == nil {
			real, err = filepath.EvalSymlinks(real)
		}
		if err != nil {
			logger.Warn("the ledger's tables stay in the resident set", "reason", err.Error())
		} else {
			b.startRelease(real, every)
		}
	}
	return b, nil
}

// ownerID is owner, or a new random id when owner is empty.
func ownerID(owner string) (string, error) {
	if owner != "" {
		return owner, nil
	}
	var buf [16]byte
	if _, err := rand.Read(buf[:]); err != nil {
		return "", fmt.Errorf("store: open badger: owner id: %w", err)
	}
	return hex.EncodeToString(buf[:]), nil
}

// badgerOptions are badger's options for the ledger in dir: sized for
// small records and a gateway that must stay within 200 MB.
func badgerOptions(dir string, opts Options, logger *slog.Logger) badger.Options {
	bo := badger.DefaultOptions(dir)
	if opts.InMemory {
		bo = badger.DefaultOptions("").WithInMemory(true)
	}
	bo = bo.WithSyncWrites(opts.SyncWrites).
		WithLogger(badgerLogger{l: logger.With("component", "badger")}).
		// Ledger values are small; keep them in the LSM tree so that the
		// value log needs no garbage collection, and do not preallocate a
		// 2 GB value log file that would stay empty (it is mapped at twice
		// its size).
		WithValueThreshold(1 << 20).
		WithValueLogFileSize(16 << 20).
		WithNumVersionsToKeep(1).
		// No block compression: ledger records are small, and uncompressed
		// tables keep the "no prompt or key at rest" property checkable by
		// scanning the files (a compressed block could hide a canary).
		WithCompression(options.None).
		// Memory, sized for records of a few hundred bytes and a gateway
		// that must stay within 200 MB (BenchmarkLedgerRSS measures it).
		// Each memtable is a Go-heap arena of its size plus 15 % and a
		// write-ahead file mapped at twice its size; badger's defaults
		// (five of 64 MB) cost over 300 MB of heap and mappings.
		WithMemTableSize(badgerMemTableSize).
		WithNumMemtables(2).
		// Every read looks in each level-0 table (its bloom filter), and
		// they are the flushed 8 MB memtables: start compacting at 2 and
		// stall writes only at 8, which small tables never reach while
		// compaction keeps up.
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		// Table builders (flushes and compactions) take Go-heap buffers of
		// twice the table size and grow them, up to 8 + splits at once per
		// compaction, and badger pools up to 8 of them afterwards: two
		// compactors and 1 MB base tables (default 2 MB) keep that small.
		WithNumCompactors(2).
		WithBaseTableSize(1 << 20).
		// No block cache: it only holds decompressed or decrypted blocks,
		// and with neither, reads come straight from the mapped tables
		// (badger: "adding a cache will lead to unnecessary overhead"). No
		// index cache either: it is used only for encrypted tables; ours
		// read their indexes in place from the mapping.
		WithBlockCacheSize(0).
		WithIndexCacheSize(0)
	return bo
}

// startRelease releases the data blocks of the tables in dir from the
// resident set every interval, until Close. Where it cannot (not Linux),
// it says so once and stops.
func (b *Store) startRelease(dir string, every time.Duration) {
	b.releaseStop, b.releaseDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(b.releaseDone)
		t := time.NewTicker(every)
		defer t.Stop()
		released := make(map[uint64]bool)
		lastErr := ""
		for {
			select {
			case <-b.releaseStop:
				return
			case <-t.C:
			}
			n, err := b.releaseTables(dir, released, nil)
			if errors.Is(err, errReleaseUnsupported) {
				b.log.Info("the ledger's tables stay in the resident set", "reason", err.Error())
				return
			}
			if err != nil {
				// Once per kind: a lasting cause (no /proc) would say it
				// every pass.
				if msg := err.Error(); msg != lastErr {
					b.log.Warn("releasing the ledger's tables from the resident set", "error", msg)
					lastErr = msg
				}
				continue
			}
			lastErr = ""
			if n > 0 {
				b.log.Debug("ledger tables released from the resident set", "bytes", n)
			}
		}
	}()
}

// Owner is this process's boot id, as written on the holds it takes.
func (b *Store) Owner() string { return b.owner }

// Close refuses new holds (waiting for one being written to the hold log),
// then flushes and closes the database. The holds still open stay in the
// hold log, for the next process's RecoverHolds. It is safe to call more
// than once.
func (b *Store) Close() error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		if b.releaseStop != nil {
			close(b.releaseStop)
			<-b.releaseDone
		}
		b.holdLog.close()
		if err := b.db.Close(); err != nil {
			b.closeErr = fmt.Errorf("store: close badger: %w", err)
		}
	})
	return b.closeErr
}

// lock takes the stripe of account and returns its unlock.
func (b *Store) lock(account string) func() { return lockStripe(&b.stripes, account) }

// lockStripe takes the stripe of s and returns its unlock.
func lockStripe(stripes *[stripeCount]sync.Mutex, s string) func() {
	m := &stripes[fnv(s)%stripeCount]
	m.Lock()
	return m.Unlock
}

// fnv is the FNV-1a hash of s, which picks its stripe.
func fnv(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// update runs fn in a read-write transaction, retrying on ErrConflict. fn
// must set all of its results afresh on every run.
func (b *Store) update(ctx context.Context, fn func(txn *badger.Txn) error) error {
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := b.db.Update(fn)
		if !errors.Is(err, badger.ErrConflict) {
			return err
		}
		if attempt >= maxConflictAttempts {
			return fmt.Errorf("store: transaction conflicted %d times: %w", attempt, err)
		}
		// A short, growing pause lets the other transaction commit.
		time.Sleep(time.Duration(attempt) * 50 * time.Microsecond)
	}
}

// view runs fn in a read-only transaction.
func (b *Store) view(ctx context.Context, fn func(txn *badger.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.View(fn)
}

// badgerLogger routes badger's messages to slog: errors at error level,
// everything else (open, compaction, cache metrics) at debug level, so a
// normal log shows none of them.
type badgerLogger struct{ l *slog.Logger }

func (g badgerLogger) Errorf(f string, v ...any) {
	g.l.Error(strings.TrimSpace(fmt.Sprintf(f, v...)))
}

func (g badgerLogger) Warningf(f string, v ...any) { g.debug(f, v...) }
func (g badgerLogger) Infof(f string, v ...any)    { g.debug(f, v...) }
func (g badgerLogger) Debugf(f string, v ...any)   { g.debug(f, v...) }

func (g badgerLogger) debug(f string, v ...any) {
	if !g.l.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	g.l.Debug(strings.TrimSpace(fmt.Sprintf(f, v...)))
}

// Badger is a store.Store (its Exporter guard is in export.go); it takes
// no allotments (store.Allotter): its holds commit where the gateway runs.
var _ store.Store = (*Store)(nil)

// Ping reports whether the store is open.
func (b *Store) Ping(ctx context.Context) error {
	if b.db.IsClosed() {
		return fmt.Errorf("badger: %w: closed", store.ErrUnavailable)
	}
	return ctx.Err()
}

// InProcess reports that the ledger is inside the process: Hold never waits
// in a queue and Settle, Release and RefundJob ignore their context's
// cancellation (see ledger.go), so callers need not give them deadlines.
func (b *Store) InProcess() bool { return true }
