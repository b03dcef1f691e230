package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

// testServer is RELAY_TEST_POSTGRES, a server the tests may create
// databases on; testDB is this package's own database on it, made by
// TestMain and dropped after, so that packages can run in parallel.
var (
	testServer string
	testDB     string
	schemas    atomic.Int64
)

func TestMain(m *testing.M) {
	testServer = os.Getenv("RELAY_TEST_POSTGRES")
	if testServer == "" {
		os.Exit(m.Run()) // every test skips, saying how to run it
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "relay_test_postgres_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, testServer)
	if err != nil {
		fmt.Fprintf(os.Stderr, "RELAY_TEST_POSTGRES=%s: %v\n", testServer, err)
		os.Exit(1)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		fmt.Fprintf(os.Stderr, "create database %s: %v\n", name, err)
		os.Exit(1)
	}
	testDB = withDB(testServer, name, "")
	code := m.Run()
	if _, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
		fmt.Fprintf(os.Stderr, "drop database %s: %v\n", name, err)
	}
	_ = admin.Close(ctx)
	os.Exit(code)
}

// withDB is the URL dsn pointed at database db and, if set, schema.
func withDB(dsn, db, schema string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic(fmt.Sprintf("RELAY_TEST_POSTGRES must be a postgres:// URL: %v", err))
	}
	u.Path = "/" + db
	if schema != "" {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// needDB skips t unless a server is named.
func needDB(t testing.TB) {
	t.Helper()
	if testServer == "" {
		t.Skip("PostgreSQL tests skipped: set RELAY_TEST_POSTGRES to a server the tests may create databases on, e.g. RELAY_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test")
	}
}

// freshDSN makes an empty schema in the package's database and returns a
// DSN whose search_path is it: a fresh, empty store's home.
func freshDSN(t testing.TB) string {
	t.Helper()
	needDB(t)
	schema := fmt.Sprintf("s%d", schemas.Add(1))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testDB)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	return withDB(testServer, dbName(), schema)
}

func dbName() string {
	u, _ := url.Parse(testDB)
	return u.Path[1:]
}

// openStore opens a store on dsn, closed when t ends.
func openStore(t testing.TB, dsn string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// exec runs sql on dsn.
func exec(t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
