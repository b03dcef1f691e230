package store

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"
)

// Login is an account holder's sign-in to the web console: an email address
// bound to one account. The password is kept only as a KDF hash, and the
// one-time set-password token only as its SHA-256 (HashKey).
type Login struct {
	Email        string    `json:"email"` // lower-cased; the login's id
	Account      string    `json:"account"`
	PasswordHash string    `json:"password_hash,omitempty"` // PHC string of the KDF; "" until set
	SetupHash    string    `json:"setup_hash,omitempty"`    // HashKey of the one-time token; "" when none
	SetupExpires time.Time `json:"setup_expires,omitzero"`
	Created      time.Time `json:"created"`
	Updated      time.Time `json:"updated"`
}

// Session is a signed-in console session. ID is HashKey of the cookie's
// secret: the cookie itself is never stored.
type Session struct {
	ID       string    `json:"id"`
	Operator bool      `json:"operator"`          // signed in with the admin token
	Email    string    `json:"email,omitempty"`   // the login; "" for the operator
	Account  string    `json:"account,omitempty"` // the login's account; "" for the operator
	CSRF     string    `json:"csrf"`              // the session's CSRF token
	Created  time.Time `json:"created"`
	Seen     time.Time `json:"seen"`    // last use (idle expiry)
	Expires  time.Time `json:"expires"` // absolute expiry
}

// Console keeps the web console's logins and sessions.
type Console interface {
	// IssueLogin creates the login for email on account, or keeps the
	// existing one (its password stays until the token is used), and sets
	// its one-time setup token (setupHash, expires), replacing any earlier
	// token. ErrNotFound for an unknown account; ErrExists when email is
	// another account's login.
	IssueLogin(ctx context.Context, email, account, setupHash string, expires, now time.Time) (Login, error)
	// Login returns the login by email (lower-cased by the caller); ErrNotFound if none.
	Login(ctx context.Context, email string) (Login, error)
	// SetPassword uses the setup token once: it sets the password hash of
	// the login whose SetupHash is setupHash and whose token has not
	// expired at now, clears the token, ends the login's sessions, and
	// returns the login. ErrNotFound when no unexpired token matches (a
	// token used once is not found the second time).
	SetPassword(ctx context.Context, setupHash, passwordHash string, now time.Time) (Login, error)
	// ListLogins lists the account's logins by email ("" lists all), never with hashes blanked — callers do that.
	ListLogins(ctx context.Context, account string) ([]Login, error)
	// PutSession stores a new session; ErrExists for its id again.
	PutSession(ctx context.Context, s Session) error
	// Session returns the session by id; ErrNotFound if none. Expiry is the
	// caller's to check (the store may purge expired ones at any time).
	Session(ctx context.Context, id string) (Session, error)
	// TouchSession sets the session's Seen; ErrNotFound if none.
	TouchSession(ctx context.Context, id string, seen time.Time) error
	// DeleteSession ends the session; ending one that does not exist is not an error.
	DeleteSession(ctx context.Context, id string) error
	// PurgeSessions deletes the sessions that expired (Expires ≤ now) or
	// went idle (Seen ≤ idleBefore) and reports how many.
	PurgeSessions(ctx context.Context, now, idleBefore time.Time) (int, error)
}

// Shapes of console setup tokens and emails.
const (
	SetupTokenPrefix = "rls-" // every set-password token starts with it
	setupTokenChars  = 43     // base62 characters after SetupTokenPrefix (≈256 bits)
	MaxEmailLen      = 254    // bytes, the longest address SMTP carries (RFC 5321 path)
)

// NewSetupToken makes a one-time set-password token: "rls-" and 43 base62
// characters from crypto/rand, put in the setup link and never stored; hash
// is HashKey(token), what the store keeps.
func NewSetupToken() (token, hash string, err error) {
	secret, err := randomBase62(setupTokenChars)
	if err != nil {
		return "", "", fmt.Errorf("store: new setup token: %w", err)
	}
	token = SetupTokenPrefix + secret
	return token, HashKey(token), nil
}

// ErrEmail is wrapped by the errors of NormalizeEmail.
var ErrEmail = errors.New("invalid email")

// NormalizeEmail trims s and lower-cases it, the form a login is stored and
// looked up in, and checks that it is one bare address (no display name, no
// angle brackets, no list) of at most MaxEmailLen bytes. Lower-casing the
// local part too is deliberate: a login must not be two logins by case.
func NormalizeEmail(s string) (string, error) {
	e := strings.ToLower(strings.TrimSpace(s))
	switch {
	case e == "":
		return "", fmt.Errorf("%w: empty", ErrEmail)
	case len(e) > MaxEmailLen:
		return "", fmt.Errorf("%w: longer than %d bytes", ErrEmail, MaxEmailLen)
	}
	a, err := mail.ParseAddress(e)
	if err != nil || a.Name != "" || a.Address != e {
		return "", fmt.Errorf("%w: %q is not a bare address like name@example.com", ErrEmail, ClipNote(e))
	}
	return e, nil
}

// CheckSession checks a session before a store keeps it, and returns it in
// the form stores keep: an id that is a HashKey (lowercase hex SHA-256), a
// CSRF token, an expiry; an operator's session names no login, any other
// names its login and account; times in UTC, Created now when zero, Seen
// Created when zero.
func CheckSession(s Session) (Session, error) {
	if err := CheckKeyHash(s.ID); err != nil {
		return s, fmt.Errorf("store: session id: %w", err)
	}
	switch {
	case s.CSRF == "":
		return s, errors.New("store: session: the CSRF token is empty")
	case s.Expires.IsZero():
		return s, errors.New("store: session: no expiry")
	case s.Operator && (s.Email != "" || s.Account != ""):
		return s, errors.New("store: session: an operator's session names no login")
	case !s.Operator && (s.Email == "" || s.Account == ""):
		return s, errors.New("store: session: a login's session names its email and account")
	}
	if s.Created.IsZero() {
		s.Created = time.Now()
	}
	if s.Seen.IsZero() {
		s.Seen = s.Created
	}
	s.Created, s.Seen, s.Expires = s.Created.UTC(), s.Seen.UTC(), s.Expires.UTC()
	return s, nil
}
