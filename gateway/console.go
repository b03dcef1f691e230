package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"golang.org/x/time/rate"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/console"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// The web console (package console) is served under /console/ on the
// gateway's listener, or on console.listen (ConsoleHandler). consoleBackend
// is what it needs of the gateway: the admin API's own functions, so that
// a key made in the console follows the same rules as one made by
// POST /admin/keys.

// Failed console sign-ins are limited per login and per client address
// (the gateway's limiters: shared by the replicas when redis.url is set).
var (
	consoleLoginRate = config.RateConfig{Rate: 1.0 / 60, Burst: 5}  // 5 tries, then one a minute
	consoleAddrRate  = config.RateConfig{Rate: 1.0 / 10, Burst: 20} // 20 tries, then one per 10 s
)

// newConsole builds the console when it is enabled and the store keeps
// logins and sessions (store.Store does); nil otherwise.
func (g *Gateway) newConsole(st Store) (*console.Console, error) {
	if !g.cfg.Console.On() {
		return nil, nil
	}
	cs, ok := st.(console.Store)
	if !ok {
		g.log.Warn("console: the store keeps no logins or sessions; /console/ is off")
		return nil, nil
	}
	secret := sha256.Sum256([]byte("relay console secret\x00" + g.cfg.AdminToken))
	return console.New(console.Options{
		Config: g.cfg.Console, Store: cs, Secret: secret[:], Logger: g.log, Now: g.now,
		Backend: &consoleBackend{g: g, buckets: map[string]*rate.Limiter{}},
	})
}

// consoleRoutes mounts the console on the gateway's router unless it has
// a listener of its own.
func (g *Gateway) consoleRoutes(r *httprouter.Router) {
	if g.console == nil || g.cfg.Console.Listen != "" {
		return
	}
	h := g.consoleHandle()
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
		r.Handle(m, "/console", h)
		r.Handle(m, "/console/*rest", h)
	}
}

// consoleHandle serves the console through handle: the access log records
// "console" and the status, never the path (a setup link's token is in it).
func (g *Gateway) consoleHandle() httprouter.Handle {
	return g.handle("console", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *reqInfo) error {
		g.console.ServeHTTP(w, r)
		return nil
	})
}

// ConsoleHandler is the console for its own listener (console.listen); nil
// when the console is off or served on the gateway's listener.
func (g *Gateway) ConsoleHandler() http.Handler {
	if g.console == nil || g.cfg.Console.Listen == "" {
		return nil
	}
	h := g.consoleHandle()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/console" && !strings.HasPrefix(r.URL.Path, "/console/") {
			http.Redirect(w, r, "/console/", http.StatusSeeOther)
			return
		}
		h(w, r, nil)
	})
}

// consoleBackend implements console.Backend.
type consoleBackend struct {
	g       *Gateway
	buckets map[string]*rate.Limiter // local sign-in buckets (under limiters.mu)
}

var _ console.Backend = (*consoleBackend)(nil)

// settings turns the console's form text into the admin API's keySettings,
// so that keySettings.update applies the same checks.
func settings(s console.KeySettings) keySettings {
	raw := func(v any) json.RawMessage {
		b, _ := json.Marshal(v)
		return b
	}
	var ks keySettings
	if s.Label != nil {
		ks.Label = raw(*s.Label)
	}
	if s.Limit != nil {
		ks.LimitUSD = raw(*s.Limit)
	}
	if s.Reset != nil {
		ks.LimitReset = raw(*s.Reset)
	}
	if s.Expires != nil {
		ks.Expires = raw(*s.Expires)
	}
	if s.Allow != nil {
		ks.Allow = raw(*s.Allow)
	}
	return ks
}

// consoleErr turns the admin API's *apierr.Error into the console's, whose
// message the page shows.
func consoleErr(err error) error {
	var e *apierr.Error
	if errors.As(err, &e) && e.Status < 500 {
		field, _ := e.Code.(string)
		return &console.Error{Status: e.Status, Field: strings.TrimPrefix(field, "invalid_"), Message: e.Message}
	}
	return err
}

func (b *consoleBackend) CreateKey(ctx context.Context, account, route string, exclude []string, s console.KeySettings) (store.Key, string, error) {
	k, plain, err := b.g.createKey(ctx, account, route, exclude, settings(s))
	return k, plain, consoleErr(err)
}

// ownKey checks that id is one of account's keys: another account's key
// is not found, exactly as a key that does not exist.
func (b *consoleBackend) ownKey(ctx context.Context, account, id string) error {
	if store.CheckID("key", id) != nil {
		return &console.Error{Status: http.StatusNotFound, Message: "There is no such key on this account."}
	}
	ks, err := b.g.store.ListKeys(ctx, account)
	if err != nil {
		return err
	}
	for _, k := range ks {
		if k.ID == id {
			return nil
		}
	}
	return &console.Error{Status: http.StatusNotFound, Message: "There is no such key on this account."}
}

func (b *consoleBackend) UpdateKey(ctx context.Context, account, id string, s console.KeySettings) (store.Key, error) {
	if err := b.ownKey(ctx, account, id); err != nil {
		return store.Key{}, err
	}
	k, err := b.g.updateKey(ctx, id, settings(s))
	return k, consoleErr(err)
}

func (b *consoleBackend) RevokeKey(ctx context.Context, account, id string) (store.Key, error) {
	if err := b.ownKey(ctx, account, id); err != nil {
		return store.Key{}, err
	}
	k, err := b.g.revokeKey(ctx, id)
	return k, consoleErr(err)
}

func (b *consoleBackend) Routes() []string { return b.g.routeNames() }

func (b *consoleBackend) Models(routes []string) []pricing.Model {
	all := b.g.host.Catalog().Models()
	if routes == nil {
		return all
	}
	var out []pricing.Model
	for _, m := range all {
		for _, rt := range routes {
			if keyMayCall(store.Key{Route: rt}, m) {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

func (b *consoleBackend) Lines() []console.Line {
	hs := b.g.lines.health()
	out := make([]console.Line, len(hs))
	for i, h := range hs {
		l := console.Line{Name: h.Name, Route: h.Route, Protocol: h.Protocol, Models: h.Models, Breaker: h.Breaker,
			Requests: h.Requests, Failures: h.Failures, Latency: b.g.lines.byName[h.Name].latency().Round(100 * time.Microsecond)}
		for _, f := range h.RecentFailures {
			l.RecentFailures = append(l.RecentFailures, console.LineFailure{Time: f.Time, Error: f.Error})
		}
		out[i] = l
	}
	return out
}

func (b *consoleBackend) Plugins() []console.Plugin {
	ps := b.g.host.Catalog().Plugins()
	out := make([]console.Plugin, len(ps))
	for i, p := range ps {
		v := p.SHA256
		if len(v) > 12 {
			v = v[:12]
		}
		out[i] = console.Plugin{Name: p.Name, Version: "sha256:" + v, Models: p.Models, Loaded: p.Loaded}
	}
	return out
}

func (b *consoleBackend) Allow(ctx context.Context, bucket string) (bool, time.Duration) {
	rc := consoleAddrRate
	if strings.HasPrefix(bucket, "login:") {
		rc = consoleLoginRate
	}
	err := b.g.limits.allow(ctx, b.buckets, "console:", bucket, rc, b.g.now(), "too many failed sign-ins")
	if err == nil {
		return true, 0
	}
	var e *apierr.Error
	if errors.As(err, &e) && e.RetryWait > 0 {
		return false, e.RetryWait
	}
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return false, time.Duration(e.RetryAfter) * time.Second
	}
	return false, time.Second
}

func (b *consoleBackend) AdminToken(tok string) bool {
	return b.g.isAdminToken(tok)
}

func (b *consoleBackend) CreateAccount(ctx context.Context, id string) (store.Account, error) {
	if !validAccountID(id) {
		return store.Account{}, &console.Error{Status: http.StatusBadRequest, Field: "id", Message: "account id: 1–64 letters, digits, '-', '_' or '.'"}
	}
	return b.g.store.CreateAccount(ctx, id)
}

func (b *consoleBackend) Credit(ctx context.Context, account string, usd pricing.Nano, note string) (store.Account, error) {
	if err := b.g.credit(ctx, account, usd, note); err != nil {
		return store.Account{}, consoleErr(err)
	}
	b.g.bill.WaitSettled(ctx, account)
	return b.g.store.Balance(ctx, account)
}

func (b *consoleBackend) Settled(ctx context.Context, account string) {
	b.g.bill.WaitSettled(ctx, account)
}
