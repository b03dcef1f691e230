package postgres

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/store"
)

// TestMigrateTwice: a second Migrate, and an Open after it, apply nothing.
func TestMigrateTwice(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	applied, err := Migrate(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != SchemaVersion() || SchemaVersion() < 1 {
		t.Fatalf("first Migrate applied %v, want 1..%d", applied, SchemaVersion())
	}
	again, err := Migrate(ctx, dsn)
	if err != nil || len(again) != 0 {
		t.Fatalf("second Migrate applied %v (err %v), want none", again, err)
	}
	s := openStore(t, dsn, Options{RenewEvery: -1})
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM relay_schema`).Scan(&n); err != nil || n != SchemaVersion() {
		t.Fatalf("relay_schema has %d rows (err %v), want %d", n, err, SchemaVersion())
	}
}

// TestMigrateConcurrentOpen: three replicas opening an empty database
// together migrate it once; all three then work on the same books.
func TestMigrateConcurrentOpen(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied [][]int
		stores  []*Store
	)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := Migrate(ctx, dsn)
			if err != nil {
				t.Error(err)
				return
			}
			s, err := Open(ctx, dsn, Options{RenewEvery: -1})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			applied = append(applied, a)
			stores = append(stores, s)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, s := range stores {
		t.Cleanup(func() { _ = s.Close() })
	}
	if t.Failed() {
		return
	}
	migrated := 0
	for _, a := range applied {
		if len(a) > 0 {
			migrated++
			if len(a) != SchemaVersion() {
				t.Errorf("one Migrate applied %v, want all %d", a, SchemaVersion())
			}
		}
	}
	if migrated != 1 {
		t.Fatalf("%d of 3 replicas migrated (%v), want exactly 1", migrated, applied)
	}
	if _, err := stores[0].Credit(ctx, "acme", 5, "x"); err != nil {
		t.Fatal(err)
	}
	for _, s := range stores[1:] {
		if a, err := s.Balance(ctx, "acme"); err != nil || a.Balance != 5 {
			t.Fatalf("another replica sees %+v, %v", a, err)
		}
	}
}

// TestMigrateNewerRefused: a database at a schema version this build does
// not know is refused at Open and by Migrate, with a message that says so.
func TestMigrateNewerRefused(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	if _, err := Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	exec(t, dsn, `INSERT INTO relay_schema (version, name) VALUES ($1, 'from_the_future.sql')`, SchemaVersion()+1)
	_, err := Open(ctx, dsn, Options{RenewEvery: -1})
	if !errors.Is(err, ErrSchemaNewer) {
		t.Fatalf("Open of a newer schema: %v, want ErrSchemaNewer", err)
	}
	if !strings.Contains(err.Error(), "newer relay") {
		t.Errorf("message %q does not tell the operator what to do", err)
	}
	if _, err := Migrate(ctx, dsn); !errors.Is(err, ErrSchemaNewer) {
		t.Fatalf("Migrate of a newer schema: %v, want ErrSchemaNewer", err)
	}
}

// TestUnreachable: a server that does not answer is ErrUnavailable, so the
// gateway can answer 503.
func TestUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Open(ctx, "postgres://postgres@127.0.0.1:1/none?connect_timeout=5", Options{RenewEvery: -1})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open of a closed port: %v, want ErrUnavailable", err)
	}
	if !NotUpYet(err) {
		t.Fatalf("Open of a closed port: %v, not worth waiting for", err)
	}
}

// TestNotUpYet: what is worth waiting for at start (a server that is not
// there yet) and what is not (a database that does not exist, TLS the
// server does not offer).
func TestNotUpYet(t *testing.T) {
	needDB(t)
	ctx := context.Background()
	u, err := url.Parse(testServer)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/relay_no_such_database"
	_, err = Open(ctx, u.String(), Options{RenewEvery: -1})
	if err == nil || NotUpYet(err) {
		t.Errorf("Open of a database that does not exist: %v; want an error not worth waiting for", err)
	}
	var sslOn string
	if err := pgxQueryOne(ctx, testServer, `SELECT current_setting('ssl')`, &sslOn); err != nil {
		t.Fatal(err)
	}
	// TLS that cannot work: required of a server without it, or verified
	// against a CA that did not sign the server's certificate.
	q := u.Query()
	q.Set("sslmode", "require")
	if sslOn == "on" {
		q.Set("sslmode", "verify-full")
		q.Set("sslrootcert", unrelatedCA(t))
	}
	u.RawQuery, u.Path = q.Encode(), "/"+dbName()
	_, err = Open(ctx, u.String(), Options{RenewEvery: -1})
	t.Logf("sslmode=%s: %v", q.Get("sslmode"), err)
	if err == nil || NotUpYet(err) {
		t.Errorf("Open with TLS that cannot work (%s): %v; want an error not worth waiting for", q.Get("sslmode"), err)
	}
}

// unrelatedCA writes a self-signed CA certificate no server uses and
// returns its file's path.
func unrelatedCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "unrelated test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func pgxQueryOne(ctx context.Context, dsn, sql string, dst any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, sql).Scan(dst)
}

// TestStatementTimeoutUnavailable: a statement the server cancels for
// running past the statement timeout is ErrUnavailable and leaves nothing
// written.
func TestStatementTimeoutUnavailable(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	s := openStore(t, dsn, Options{RenewEvery: -1, StatementTimeout: 200 * time.Millisecond})
	if _, err := s.Credit(ctx, "acme", usd, "c"); err != nil {
		t.Fatal(err)
	}
	// Another session holds the account's row lock past the timeout.
	locker, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM accounts WHERE id = 'acme' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	err = s.Hold(ctx, hold("acme", "r1", usd/2))
	_ = tx.Rollback(ctx)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Hold past the statement timeout: %v, want ErrUnavailable", err)
	}
	r := audit(t, s, "acme")
	if r.Account.Held != 0 || r.OpenHolds != 0 {
		t.Fatalf("a timed-out hold left %+v", r)
	}
}

// TestMigrateKeyLimitsOverBooks: migration 0003 over books written at
// version 2, with an open hold, keeps them: the key has no settings and no
// spend, the old hold ends without touching its key, and new holds count
// on it.
func TestMigrateKeyLimitsOverBooks(t *testing.T) {
	dsn := freshDSN(t)
	ctx := context.Background()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:2] {
		exec(t, dsn, m.sql)
	}
	exec(t, dsn, `CREATE TABLE relay_schema (version integer PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())`)
	exec(t, dsn, `INSERT INTO relay_schema (version, name) VALUES (1, $1), (2, $2)`, ms[0].name, ms[1].name)
	// Version 2's books: 10 USD, a key, and a hold of 1 USD on it.
	exec(t, dsn, `INSERT INTO accounts (id, balance, held, seq) VALUES ('acme', $1, $2, 1)`, int64(10*usd), int64(usd))
	exec(t, dsn, `INSERT INTO journal (account, seq, kind, amount, balance_after) VALUES ('acme', 1, 'credit', $1, $1)`, int64(10*usd))
	exec(t, dsn, `INSERT INTO keys (id, hash, account, route, created) VALUES ('key_t', $1, 'acme', 'auto', now())`, store.HashKey("secret-key_t"))
	exec(t, dsn, `INSERT INTO holds (request_id, account, key_id, amount, created, owner, lease_until)
		VALUES ('old', 'acme', 'key_t', $1, now(), 'r0', now() + interval '1 minute')`, int64(usd))

	s := openStore(t, dsn, Options{RenewEvery: -1})
	if k := keyOf(t, s, "key_t"); k.Limit != 0 || k.Reset != "" || !k.Expires.IsZero() || k.Allow != nil || k.Spent != 0 || k.Held != 0 {
		t.Fatalf("key after the migration: %+v", k)
	}
	if a, err := s.Balance(ctx, "acme"); err != nil || a.AlertBelow != 0 || a.Held != usd {
		t.Fatalf("account after the migration: %+v, %v", a, err)
	}
	if _, err := s.Settle(ctx, store.Settlement{RequestID: "old", Account: "acme", Charge: usd / 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.Hold(ctx, hold("acme", "new", usd)); err != nil {
		t.Fatal(err)
	}
	if k := keyOf(t, s, "key_t"); k.Spent != 0 || k.Held != usd {
		t.Errorf("key after the old hold's settle and a new hold: %+v", k)
	}
	audit(t, s, "acme")
}

// TestWarnsWithoutAutovacuum: Open warns exactly when the server runs
// without autovacuum.
func TestWarnsWithoutAutovacuum(t *testing.T) {
	dsn := freshDSN(t)
	var on string
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(context.Background(), `SELECT current_setting('autovacuum')`).Scan(&on); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	openStore(t, dsn, Options{RenewEvery: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if warned := strings.Contains(logs.String(), "autovacuum is off"); warned != (on == "off") {
		t.Fatalf("autovacuum %s, warned %v:\n%s", on, warned, logs.String())
	}
}
