package console

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelrelay/modelrelay/store"
)

// signinData is the sign-in page: a form for an account holder's login
// and one for the operator's admin token.
type signinData struct {
	CSRF    string
	Email   string
	Error   string
	Field   string
	Notice  string
	Expired bool
}

func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if s, err := c.current(r); err == nil && s != nil {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return
	}
	c.renderSignin(w, r, http.StatusOK, signinData{})
}

func (c *Console) renderSignin(w http.ResponseWriter, r *http.Request, status int, d signinData) {
	tok, err := c.preToken(w, r)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	d.CSRF = tok
	c.render(w, r, status, "signin", page{Title: "Sign in", Data: d})
}

// signin checks an account holder's email and password. The KDF runs for
// an unknown email too, so the answer's time does not tell whether the
// login exists.
func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if err := c.checkPre(r); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	email, pw := r.PostFormValue("email"), r.PostFormValue("password")
	norm, emailErr := store.NormalizeEmail(email)
	if emailErr != nil {
		norm = strings.ToLower(strings.TrimSpace(email))
	}
	buckets := []string{"addr:" + clientAddr(r), "login:" + store.HashKey(norm)[:32]}
	if c.limited(w, r, buckets, signinData{Email: email}) {
		return
	}
	l, ok, err := c.verifyLogin(r.Context(), norm, pw, emailErr == nil)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	if !ok {
		c.log.Info("console: sign-in refused", "addr", clientAddr(r))
		if c.failed(w, r, buckets, signinData{Email: email}) {
			return
		}
		c.renderSignin(w, r, http.StatusUnauthorized, signinData{Email: email, Field: "password",
			Error: "The email or the password is wrong."})
		return
	}
	if err := c.startSession(r.Context(), w, r, false, l); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	c.log.Info("console: signed in", "account", l.Account, "addr", clientAddr(r))
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

// verifyLogin reports whether pw is email's password; the KDF runs once
// whatever the outcome (a dummy hash for an unknown or password-less login).
func (c *Console) verifyLogin(ctx context.Context, email, pw string, valid bool) (store.Login, bool, error) {
	var l store.Login
	hash := dummyHash()
	if valid {
		var err error
		l, err = c.st.Login(ctx, email)
		switch {
		case err == nil && l.PasswordHash != "":
			hash = l.PasswordHash
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return l, false, err
		}
	}
	if len(pw) > maxPassword {
		pw = pw[:maxPassword] // still runs the KDF; cannot match a stored password
		hash = dummyHash()
	}
	if err := c.kdf.acquire(ctx); err != nil {
		return l, false, err
	}
	match, err := verifyPassword(pw, hash)
	c.kdf.release()
	if err != nil {
		c.log.Error("console: a login's password hash cannot be read", "account", l.Account)
		return l, false, nil
	}
	return l, match && hash != dummyHash(), nil
}

// operatorSignin signs the operator in with the admin token. An API key
// typed here is refused by name.
func (c *Console) operatorSignin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if err := c.checkPre(r); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	buckets := []string{"addr:" + clientAddr(r)}
	if c.limited(w, r, buckets, signinData{}) {
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	if strings.HasPrefix(tok, "sk-") {
		c.log.Info("console: operator sign-in refused (an API key)", "addr", clientAddr(r))
		if c.failed(w, r, buckets, signinData{}) {
			return
		}
		c.renderSignin(w, r, http.StatusUnauthorized, signinData{Field: "admin-token",
			Error: "That is an API key (sk-…): API keys never open the console. Use the admin token."})
		return
	}
	if tok == "" || !c.be.AdminToken(tok) {
		c.log.Info("console: operator sign-in refused", "addr", clientAddr(r))
		if c.failed(w, r, buckets, signinData{}) {
			return
		}
		c.renderSignin(w, r, http.StatusUnauthorized, signinData{Field: "admin-token", Error: "The admin token is wrong."})
		return
	}
	if err := c.startSession(r.Context(), w, r, true, store.Login{}); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	c.log.Info("console: operator signed in", "addr", clientAddr(r))
	http.Redirect(w, r, "/console/admin/accounts", http.StatusSeeOther)
}

// limited answers 429 when one of buckets was emptied by earlier failures.
func (c *Console) limited(w http.ResponseWriter, r *http.Request, buckets []string, d signinData) bool {
	wait := c.blockedFor(buckets)
	if wait == 0 {
		return false
	}
	c.tooMany(w, r, wait, d)
	return true
}

// failed counts a failed sign-in against each bucket; when one is empty
// it answers 429.
func (c *Console) failed(w http.ResponseWriter, r *http.Request, buckets []string, d signinData) bool {
	wait := c.countFailure(r, buckets)
	if wait == 0 {
		return false
	}
	c.tooMany(w, r, wait, d)
	return true
}

func (c *Console) tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration, d signinData) {
	d.Error = tooManyText(w, wait)
	c.renderSignin(w, r, http.StatusTooManyRequests, d)
}

// blockedFor is how long any of buckets stays blocked (0: none is).
func (c *Console) blockedFor(buckets []string) time.Duration {
	now := c.now()
	var wait time.Duration
	for _, b := range buckets {
		wait = max(wait, c.blocked.until(b, now))
	}
	return wait
}

// countFailure takes a token from each bucket (the Backend's limiter);
// a bucket found empty is blocked, and the wait is returned (0: none).
func (c *Console) countFailure(r *http.Request, buckets []string) time.Duration {
	var wait time.Duration
	now := c.now()
	for _, b := range buckets {
		if ok, after := c.be.Allow(r.Context(), b); !ok {
			after = max(after, time.Second)
			c.blocked.block(b, now.Add(after))
			wait = max(wait, after)
		}
	}
	if wait > 0 {
		c.log.Warn("console: failed sign-ins rate-limited", "addr", clientAddr(r))
	}
	return wait
}

// tooManyText sets Retry-After and says how long to wait.
func tooManyText(w http.ResponseWriter, wait time.Duration) string {
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return "Too many failed attempts from this address or for this login. Wait " + waitText(secs) + " and try again."
}

func waitText(secs int) string {
	if secs < 120 {
		return strconv.Itoa(secs) + " seconds"
	}
	return strconv.Itoa((secs+59)/60) + " minutes"
}

// clientAddr is the connection's remote host. X-Forwarded-For is not
// trusted (a client could set it to dodge the limit), as for the gateway.
func clientAddr(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// setupData is the set-password page.
type setupData struct {
	CSRF  string
	Token string
	Error string
}

func (c *Console) setupPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	c.renderSetup(w, r, http.StatusOK, "")
}

func (c *Console) renderSetup(w http.ResponseWriter, r *http.Request, status int, msg string) {
	tok, err := c.preToken(w, r)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	c.render(w, r, status, "setup", page{Title: "Set your password", Data: setupData{CSRF: tok, Token: r.PathValue("token"), Error: msg}})
}

// setup uses a one-time setup link: it sets the login's password (which
// ends the login's other sessions) and signs the holder in.
func (c *Console) setup(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if err := c.checkPre(r); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	buckets := []string{"addr:" + clientAddr(r)}
	if wait := c.blockedFor(buckets); wait > 0 {
		c.renderSetup(w, r, http.StatusTooManyRequests, tooManyText(w, wait))
		return
	}
	token := r.PathValue("token")
	if !validSetupToken(token) {
		c.countFailure(r, buckets)
		c.fail(w, r, nil, errorf(http.StatusNotFound, "", "This set-password link is not valid. Ask the operator for a new one."))
		return
	}
	pw, again := r.PostFormValue("password"), r.PostFormValue("password2")
	if err := checkPassword(pw, again); err != nil {
		c.renderSetup(w, r, http.StatusBadRequest, err.Error()+".")
		return
	}
	if err := c.kdf.acquire(r.Context()); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	phc, err := hashPassword(pw)
	c.kdf.release()
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	l, err := c.st.SetPassword(r.Context(), store.HashKey(token), phc, c.now())
	if errors.Is(err, store.ErrNotFound) {
		// A guessed token costs a KDF run: it counts as a failed sign-in.
		c.countFailure(r, buckets)
		c.fail(w, r, nil, errorf(http.StatusNotFound, "", "This set-password link was used already, has expired or is not valid. Ask the operator for a new one."))
		return
	}
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	c.log.Info("console: password set", "account", l.Account)
	if err := c.startSession(r.Context(), w, r, false, l); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

// validSetupToken checks a setup token's shape before any work is done.
func validSetupToken(t string) bool {
	rest, ok := strings.CutPrefix(t, store.SetupTokenPrefix)
	if !ok || len(rest) != 43 {
		return false
	}
	for _, ch := range rest {
		if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z') {
			return false
		}
	}
	return true
}
