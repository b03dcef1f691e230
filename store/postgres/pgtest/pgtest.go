// Package pgtest gives tests a PostgreSQL database of their own on the
// server that RELAY_TEST_POSTGRES names (a postgres:// URL of a role that may
// create databases). Without it, tests that need one skip, saying how to run
// them, so that `make test` passes where no server runs.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Env is the variable that names the server.
const Env = "RELAY_TEST_POSTGRES"

// Server is the URL Env names, or "" when the tests must skip.
func Server() string { return os.Getenv(Env) }

// Need skips t unless a server is named.
func Need(t testing.TB) string {
	t.Helper()
	s := Server()
	if s == "" {
		t.Skip("PostgreSQL tests skipped: set " + Env + " to a server the tests may create databases on, e.g. " +
			Env + "=postgres://postgres@127.0.0.1:5432/test")
	}
	return s
}

// Database creates an empty database named prefix_<random hex>, drops it
// (closing its connections) when t ends, and returns its URL. It skips t
// when no server is named.
func Database(t testing.TB, prefix string) string {
	t.Helper()
	server := Need(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + "_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatalf("%s: %v", Env, err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer admin.Close(context.Background())
		if _, err := admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return WithDatabase(server, name)
}

// WithDatabase is the URL server pointed at database db.
func WithDatabase(server, db string) string {
	u, err := url.Parse(server)
	if err != nil {
		panic(Env + " must be a postgres:// URL: " + err.Error())
	}
	u.Path = "/" + db
	return u.String()
}
