package console

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// Backend is what the console needs of the gateway, with the admin API's
// rules: package admin implements it (gateway/admin/console.go). Errors the
// console shows to the user are *Error; any other error is a 500.
type Backend interface {
	// CreateKey makes a key on account with route, excluded models and
	// settings, as POST /admin/keys does; it returns the key and its
	// plaintext, shown once.
	CreateKey(ctx context.Context, account, route string, exclude []string, s KeySettings) (store.Key, string, error)
	// UpdateKey changes the settings of account's key id, as
	// POST /admin/keys/update does; another account's key is not found.
	UpdateKey(ctx context.Context, account, id string, s KeySettings) (store.Key, error)
	// RevokeKey revokes account's key id; another account's key is not found.
	RevokeKey(ctx context.Context, account, id string) (store.Key, error)
	// Routes are the configured route names, sorted (store.AutoRoute aside).
	Routes() []string
	// Models are the catalogue's models a key on one of routes may call
	// (nil: every model), sorted by id.
	Models(routes []string) []pricing.Model
	// Lines are the upstream lines and their health.
	Lines() []Line
	// Plugins are the loaded plugins.
	Plugins() []Plugin
	// Allow takes one token from the bucket named bucket (the failed
	// sign-in limit): ok false says to wait retryAfter.
	Allow(ctx context.Context, bucket string) (ok bool, retryAfter time.Duration)
	// AdminToken reports whether tok is the admin token (constant time).
	AdminToken(tok string) bool
	// CreateAccount creates an account, as POST /admin/accounts does (an
	// invalid id is an *Error naming id; an existing one store.ErrExists).
	CreateAccount(ctx context.Context, id string) (store.Account, error)
	// Credit adds usd to account with note, as POST /admin/accounts/{id}/credit does.
	Credit(ctx context.Context, account string, usd pricing.Nano, note string) (store.Account, error)
	// Settled waits (briefly) until the calls already answered for
	// account have settled, so a page read after a call shows it.
	Settled(ctx context.Context, account string)
}

// KeySettings are the settings a key form carries, as text; nil leaves a
// setting as it is (an update) or unset (a create). Expires is RFC 3339 or
// "none"; Limit is decimal USD ("0" for none); Reset is daily, weekly,
// monthly or none.
type KeySettings struct {
	Label   *string
	Limit   *string
	Reset   *string
	Expires *string
	Allow   *[]string
}

// Line is an upstream line as the operator's lines page shows it.
type Line struct {
	Name, Route, Protocol string
	Models                []string
	Breaker               string // closed, half-open, open
	Requests, Failures    uint64
	Latency               time.Duration // recent time to response headers; 0: none yet
	RecentFailures        []LineFailure
}

// LineFailure is one recent failure of a line.
type LineFailure struct {
	Time  time.Time
	Error string
}

// Plugin is a loaded plugin.
type Plugin struct {
	Name, Version string
	Models        []string
	Loaded        time.Time
}

// Store is what the console reads and writes of the store directly.
type Store interface {
	store.Console
	Balance(ctx context.Context, account string) (store.Account, error)
	ListAccounts(ctx context.Context, after string, limit int) ([]store.Account, error)
	ListKeys(ctx context.Context, account string) ([]store.Key, error)
	Journal(ctx context.Context, account string, from, to time.Time, fn func(store.Entry) error) error
	Charges(ctx context.Context, account string, limit int) ([]store.Entry, error)
	OpenHolds(ctx context.Context) ([]store.Hold, error)
}

// Every store.Store serves the console: the gateway finds this interface
// by type assertion (package admin), and no store can lack it.
var _ Store = store.Store(nil)

// Error is a refusal the console shows on the page: a status and a
// message (naming the field at fault).
type Error struct {
	Status  int
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Message }

func errorf(status int, field, msg string) *Error {
	return &Error{Status: status, Field: field, Message: msg}
}

// statusOf is the HTTP status of err: its own for an *Error, 404 for
// store.ErrNotFound, 409 for store.ErrExists, else 500.
func statusOf(err error) int {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Status
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, store.ErrExists):
		return http.StatusConflict
	case errors.Is(err, store.ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
