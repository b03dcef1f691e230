package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/console"
	"github.com/modelrelay/modelrelay/gateway/listen"
	"github.com/modelrelay/modelrelay/plugins"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/wire"
)

// Store is what the admin API needs of the store: accounts and their
// ledger, keys and their settings, alerts and console logins.
type Store interface {
	store.Ledger
	store.Keys
	store.KeyLimits
	store.Books
	store.Console
}

// Deps is what the admin API and the console's backend need of the
// running gateway. Every field is required.
type Deps struct {
	Config  config.Config // resolved
	Store   Store
	Plugins *plugins.Host // its catalogue: the models sold, the plugins loaded
	Logger  *slog.Logger
	Now     func() time.Time
	// Lines is the lines' health as GET /admin/lines shows it (a JSON value).
	Lines func() any
	// ConsoleLines is the lines' health as the console shows it.
	ConsoleLines func() []console.Line
	// Evict drops key id's record from this replica's key cache.
	Evict func(id string)
	// Publish tells every replica that key id's record changed, so each
	// drops its cached copy.
	Publish func(ctx context.Context, id string)
	// Settled waits until the calls of account answered so far have
	// settled (briefly; it gives up when ctx ends).
	Settled func(ctx context.Context, account string)
	// Limit takes one token for id from the limiter's bucket kind+id at
	// rc, shared by the replicas when they share a Redis; past it, a 429
	// *apierr.Error saying msg.
	Limit func(ctx context.Context, kind, id string, rc config.RateConfig, msg string) error
}

// API is the admin API and the console's backend over Deps.
type API struct {
	d Deps
}

// New makes the admin API of d.
func New(d Deps) *API { return &API{d: d} }

// Handler is an admin endpoint: it writes its answer, or returns the error
// the gateway's handler wrapper writes in the error shape
// (docs/api.md#errors).
type Handler func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error

// Routes mounts the admin API on r under /admin/, each endpoint wrapped by
// wrap (the gateway's request id, error writing and access log; name is
// the endpoint's name in the log and the metrics). It takes the admin
// token as a Bearer token; an sk- API key never opens it.
func (a *API) Routes(r *httprouter.Router, wrap func(name string, h Handler) httprouter.Handle) {
	h := func(fn Handler) httprouter.Handle { return wrap("admin", a.admin(fn)) }
	r.POST("/admin/accounts", h(a.createAccount))
	r.GET("/admin/accounts", h(a.listAccounts))
	r.GET("/admin/accounts/:account", h(a.balance))
	r.POST("/admin/accounts/:account/update", h(a.updateAccount))
	r.POST("/admin/accounts/:account/credit", h(a.handleCredit))
	r.GET("/admin/accounts/:account/charges", h(a.charges))
	r.POST("/admin/accounts/:account/login", h(a.issueLogin))
	r.POST("/admin/keys", h(a.handleCreateKey))
	r.GET("/admin/keys", h(a.listKeys))
	r.GET("/admin/keys/:id", h(a.key))
	r.POST("/admin/keys/revoke", h(a.handleRevokeKey))
	r.POST("/admin/keys/update", h(a.handleUpdateKey))
	r.GET("/admin/lines", h(a.lines))
}

func (a *API) admin(fn Handler) Handler {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return apierr.Unauthorized("the admin API needs \"Authorization: Bearer <admin token>\"")
		}
		if strings.HasPrefix(tok, "sk-") {
			return apierr.Unauthorized("API keys cannot use the admin API; use the admin token")
		}
		if !a.isAdminToken(tok) {
			return apierr.Unauthorized("invalid admin token")
		}
		return fn(w, r, ps)
	}
}

// isAdminToken compares tok with the admin token in constant time; the
// admin API and the console's operator sign-in both ask it.
func (a *API) isAdminToken(tok string) bool {
	return subtle.ConstantTimeCompare([]byte(tok), []byte(a.d.Config.AdminToken)) == 1
}

func readJSON(r *http.Request, v any) error {
	body, err := listen.ReadBody(r, 1<<20)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return apierr.BadRequest(te.Field, "%s: wrong type", te.Field)
		}
		return apierr.BadRequest("body", "invalid JSON body: %s", apierr.Bound(err.Error(), apierr.MaxMessage))
	}
	return nil
}

func storeErr(err error, what string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apierr.NotFound("%s not found", what)
	case errors.Is(err, store.ErrExists):
		return apierr.Errf(http.StatusConflict, "invalid_request_error", "exists", "%s already exists", what)
	}
	return err
}

func (a *API) routeExists(name string) bool {
	for _, r := range a.d.Config.Routes {
		if r.Name == name {
			return true
		}
	}
	return false
}

func (a *API) routeNames() []string {
	out := make([]string, 0, len(a.d.Config.Routes))
	for _, r := range a.d.Config.Routes {
		out = append(out, r.Name)
	}
	sort.Strings(out)
	return out
}

func (a *API) lines(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) error {
	return wire.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": a.d.Lines()})
}
