package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"runtime"
	"sync"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// ContentSecurityPolicy is sent with every console response: no inline
// script or style, nothing from elsewhere, no framing, forms post only here.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Options wires a Console.
type Options struct {
	Config  Config // resolved
	Backend Backend
	Store   Store
	// Secret keys the pre-session tokens of the sign-in and setup forms;
	// every replica must share it (the gateway derives it from the admin
	// token).
	Secret []byte
	// Logger receives sign-in events (never a password, token or key).
	// Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Console serves the web console.
type Console struct {
	cfg     Config
	be      Backend
	st      Store
	secret  []byte
	log     *slog.Logger
	now     func() time.Time
	kdf     kdf
	pages   map[string]*pageTemplate
	mux     *http.ServeMux
	blocked blockList

	purgeMu   sync.Mutex
	lastPurge time.Time
}

// New builds a Console.
func New(o Options) (*Console, error) {
	if o.Backend == nil || o.Store == nil || len(o.Secret) < 16 {
		return nil, errors.New("console: Backend, Store and a Secret of 16 bytes or more are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := o.Config.Resolve(); err != nil {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{
		cfg: o.Config, be: o.Backend, st: o.Store, secret: o.Secret, log: o.Logger, now: o.Now,
		kdf: newKDF(runtime.GOMAXPROCS(0)), pages: pages, blocked: blockList{m: map[string]time.Time{}},
	}
	c.mux = c.routes()
	return c, nil
}

// ServeHTTP serves everything under /console/.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			// The path is not logged: a setup link's token is in it.
			c.log.Error("console: panic in handler", "method", r.Method, "panic", fmt.Sprint(v))
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
	}()
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() *http.ServeMux {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /console/static/", http.StripPrefix("/console/static/", staticHandler(static)))
	m.HandleFunc("GET /console/signin", c.signinPage)
	m.HandleFunc("POST /console/signin", c.signin)
	m.HandleFunc("POST /console/signin/operator", c.operatorSignin)
	m.HandleFunc("GET /console/setup/{token}", c.setupPage)
	m.HandleFunc("POST /console/setup/{token}", c.setup)
	m.HandleFunc("POST /console/signout", c.session(c.signout, anyone))
	m.HandleFunc("GET /console/{$}", c.session(c.overview, anyone))
	m.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
	})
	m.HandleFunc("GET /console/keys", c.session(c.keysPage, holder))
	m.HandleFunc("POST /console/keys", c.session(c.createKey, holder))
	m.HandleFunc("POST /console/keys/{id}/limits", c.session(c.updateKey, holder))
	m.HandleFunc("POST /console/keys/{id}/revoke", c.session(c.revokeKey, holder))
	m.HandleFunc("GET /console/calls", c.session(c.callsPage, holder))
	m.HandleFunc("GET /console/calls.csv", c.session(c.callsCSV, holder))
	m.HandleFunc("GET /console/prices", c.session(c.pricesPage, holder))
	m.HandleFunc("GET /console/admin/accounts", c.session(c.accountsPage, operator))
	m.HandleFunc("POST /console/admin/accounts", c.session(c.createAccount, operator))
	m.HandleFunc("GET /console/admin/accounts/{id}", c.session(c.accountPage, operator))
	m.HandleFunc("POST /console/admin/accounts/{id}/credit", c.session(c.credit, operator))
	m.HandleFunc("POST /console/admin/accounts/{id}/login", c.session(c.issueLogin, operator))
	m.HandleFunc("GET /console/admin/lines", c.session(c.linesPage, operator))
	m.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, nil, errorf(http.StatusNotFound, "", "There is no such page."))
	})
	return m
}

// staticHandler serves the embedded assets with a day of caching (they
// change only with the binary).
func staticHandler(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || r.URL.Path[len(r.URL.Path)-1] == '/' {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=86400")
		files.ServeHTTP(w, r)
	})
}

// purge deletes expired and idle sessions, at most once a minute; each
// sign-in calls it, so the store never gathers more than a minute of them
// beyond what expiry checks on use already refuse.
func (c *Console) purge(ctx context.Context) {
	now := c.now()
	c.purgeMu.Lock()
	if now.Sub(c.lastPurge) < time.Minute {
		c.purgeMu.Unlock()
		return
	}
	c.lastPurge = now
	c.purgeMu.Unlock()
	n, err := c.st.PurgeSessions(ctx, now, now.Add(-c.cfg.IdleTimeout))
	if err != nil {
		c.log.Warn("console: purging sessions failed", "error", err.Error())
		return
	}
	if n > 0 {
		c.log.Debug("console: sessions purged", "count", n)
	}
}
