package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelrelay/modelrelay/store"
)

// Cookie names. Both are scoped to /console, HttpOnly and SameSite=Strict.
const (
	sessionCookie = "relay_console"     // 32 random bytes; the store keeps HashKey of it
	preCookie     = "relay_console_pre" // a nonce binding the sign-in and setup forms' token
	preLifetime   = time.Hour
	touchEvery    = time.Minute
	maxFormBytes  = 64 << 10
)

var b64url = base64.RawURLEncoding

// who may open a page.
type role int

const (
	anyone role = iota
	holder
	operator
)

// pageHandler serves a page for a signed-in session.
type pageHandler func(w http.ResponseWriter, r *http.Request, s *store.Session) error

// session wraps h: it finds the session from the cookie alone (an
// Authorization header is ignored), checks its expiry, touches it, checks
// the CSRF token of a POST, and hides pages of the other role (404).
func (c *Console) session(h pageHandler, who role) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		s, err := c.current(r)
		if err != nil {
			if errors.Is(err, errNoSession) {
				http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
				return
			}
			c.fail(w, r, nil, err)
			return
		}
		if (who == holder && s.Operator) || (who == operator && !s.Operator) {
			c.fail(w, r, s, errorf(http.StatusNotFound, "", "There is no such page."))
			return
		}
		if r.Method == http.MethodPost {
			if err := c.checkPost(r); err != nil {
				c.fail(w, r, s, err)
				return
			}
			if s.CSRF == "" || subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.CSRF)) != 1 {
				c.fail(w, r, s, errorf(http.StatusForbidden, "csrf", "The form's security token is missing or wrong: reload the page and try again."))
				return
			}
		}
		if err := h(w, r, s); err != nil {
			c.fail(w, r, s, err)
		}
	}
}

var errNoSession = errors.New("no session")

// current is the request's unexpired session; errNoSession when there is
// none (an expired one is deleted).
func (c *Console) current(r *http.Request) (*store.Session, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || len(ck.Value) != 43 {
		return nil, errNoSession
	}
	id := store.HashKey(ck.Value)
	s, err := c.st.Session(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoSession
	}
	if err != nil {
		return nil, err
	}
	now := c.now()
	if !now.Before(s.Expires) || now.Sub(s.Seen) >= c.cfg.IdleTimeout {
		_ = c.st.DeleteSession(r.Context(), id)
		return nil, errNoSession
	}
	if now.Sub(s.Seen) >= touchEvery {
		if err := c.st.TouchSession(r.Context(), id, now); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		s.Seen = now
	}
	return &s, nil
}

// checkPost refuses a cross-site POST (Sec-Fetch-Site, sent by every
// current browser) and reads the form within maxFormBytes.
func (c *Console) checkPost(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return errorf(http.StatusForbidden, "csrf", "Forms may be posted only from this console's own pages.")
	}
	r.Body = http.MaxBytesReader(nil, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return errorf(http.StatusBadRequest, "form", "The form could not be read (too large or malformed).")
	}
	return nil
}

// startSession stores a new session and sets its cookie.
func (c *Console) startSession(ctx context.Context, w http.ResponseWriter, r *http.Request, op bool, l store.Login) error {
	secret, err := randomToken()
	if err != nil {
		return err
	}
	csrf, err := randomToken()
	if err != nil {
		return err
	}
	now := c.now()
	s := store.Session{
		ID: store.HashKey(secret), Operator: op, Email: l.Email, Account: l.Account, CSRF: csrf,
		Created: now, Seen: now, Expires: now.Add(c.cfg.MaxAge),
	}
	if err := c.st.PutSession(ctx, s); err != nil {
		return err
	}
	http.SetCookie(w, c.cookie(r, sessionCookie, secret, int(c.cfg.MaxAge/time.Second)))
	clearCookie(w, r, preCookie)
	c.purge(ctx)
	return nil
}

func (c *Console) signout(w http.ResponseWriter, r *http.Request, s *store.Session) error {
	if err := c.st.DeleteSession(r.Context(), s.ID); err != nil {
		return err
	}
	clearCookie(w, r, sessionCookie)
	http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
	return nil
}

// cookie is a console cookie: Path=/console, HttpOnly, SameSite=Strict,
// Secure when the request came over TLS.
func (c *Console) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: name, Value: value, Path: "/console", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	}
}

func clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/console", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

// randomToken is 32 random bytes, base64url without padding (43 characters).
func randomToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return b64url.EncodeToString(b[:]), nil
}

// preToken is the CSRF token of the forms shown before there is a session
// (sign-in, setup): an HMAC of the pre-session cookie's nonce and expiry.
// It sets the cookie when the request has no valid one.
func (c *Console) preToken(w http.ResponseWriter, r *http.Request) (string, error) {
	if ck, err := r.Cookie(preCookie); err == nil {
		if exp, ok := c.preValid(ck.Value); ok && exp.Sub(c.now()) > 10*time.Minute {
			return c.preMAC(ck.Value), nil
		}
	}
	nonce, err := randomToken()
	if err != nil {
		return "", err
	}
	v := nonce + "." + strconv.FormatInt(c.now().Add(preLifetime).Unix(), 10)
	http.SetCookie(w, c.cookie(r, preCookie, v, int(preLifetime/time.Second)))
	return c.preMAC(v), nil
}

func (c *Console) preValid(v string) (time.Time, bool) {
	nonce, exp, ok := strings.Cut(v, ".")
	if !ok || len(nonce) != 43 {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	t := time.Unix(n, 0)
	return t, c.now().Before(t)
}

func (c *Console) preMAC(v string) string {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte("relay console pre-session\x00"))
	m.Write([]byte(v))
	return b64url.EncodeToString(m.Sum(nil))
}

// checkPre checks a pre-session form: a same-site POST whose csrf field is
// the MAC of an unexpired pre-session cookie.
func (c *Console) checkPre(r *http.Request) error {
	if err := c.checkPost(r); err != nil {
		return err
	}
	bad := errorf(http.StatusForbidden, "csrf", "The form's security token is missing, wrong or expired: reload the page and try again.")
	ck, err := r.Cookie(preCookie)
	if err != nil {
		return bad
	}
	if _, ok := c.preValid(ck.Value); !ok {
		return bad
	}
	if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(c.preMAC(ck.Value))) {
		return bad
	}
	return nil
}

// blockList remembers, per process, the sign-in buckets the limiter
// emptied, so that further attempts are refused before any KDF runs.
// The limit itself is the Backend's (shared by replicas through Redis).
type blockList struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (b *blockList) until(bucket string, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.m[bucket]
	if !ok {
		return 0
	}
	if !now.Before(t) {
		delete(b.m, bucket)
		return 0
	}
	return t.Sub(now)
}

func (b *blockList) block(bucket string, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.m) > 100_000 { // bound memory under address churn
		clear(b.m)
	}
	b.m[bucket] = until
}
