package admin

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/console"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// The web console (package console) is served under /console/ on the
// gateway's listener, or on console.listen. consoleBackend is what it
// needs of the gateway: the admin API's own functions, so that a key made
// in the console follows the same rules as one made by POST /admin/keys.

// Failed console sign-ins are limited per login and per client address
// (the gateway's limiters: shared by the replicas when redis.url is set).
var (
	consoleLoginRate = config.RateConfig{Rate: 1.0 / 60, Burst: 5}  // 5 tries, then one a minute
	consoleAddrRate  = config.RateConfig{Rate: 1.0 / 10, Burst: 20} // 20 tries, then one per 10 s
)

// Console builds the console when it is enabled and the store keeps
// logins and sessions (store.Store does); nil otherwise.
func (a *API) Console() (*console.Console, error) {
	cfg := a.d.Config
	if !cfg.Console.On() {
		return nil, nil
	}
	cs, ok := a.d.Store.(console.Store)
	if !ok {
		a.d.Logger.Warn("console: the store keeps no logins or sessions; /console/ is off")
		return nil, nil
	}
	secret := sha256.Sum256([]byte("relay console secret\x00" + cfg.AdminToken))
	return console.New(console.Options{
		Config: cfg.Console, Store: cs, Secret: secret[:], Logger: a.d.Logger, Now: a.d.Now,
		Backend: &consoleBackend{a: a},
	})
}

// consoleBackend implements console.Backend.
type consoleBackend struct {
	a *API
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
	k, plain, err := b.a.createKey(ctx, account, route, exclude, settings(s))
	return k, plain, consoleErr(err)
}

// ownKey checks that id is one of account's keys: another account's key
// is not found, exactly as a key that does not exist.
func (b *consoleBackend) ownKey(ctx context.Context, account, id string) error {
	if store.CheckID("key", id) != nil {
		return &console.Error{Status: http.StatusNotFound, Message: "There is no such key on this account."}
	}
	ks, err := b.a.d.Store.ListKeys(ctx, account)
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
	k, err := b.a.updateKey(ctx, id, settings(s))
	return k, consoleErr(err)
}

func (b *consoleBackend) RevokeKey(ctx context.Context, account, id string) (store.Key, error) {
	if err := b.ownKey(ctx, account, id); err != nil {
		return store.Key{}, err
	}
	k, err := b.a.revokeKey(ctx, id)
	return k, consoleErr(err)
}

func (b *consoleBackend) Routes() []string { return b.a.routeNames() }

func (b *consoleBackend) Models(routes []string) []pricing.Model {
	all := b.a.d.Plugins.Catalog().Models()
	if routes == nil {
		return all
	}
	var out []pricing.Model
	for _, m := range all {
		for _, rt := range routes {
			if onRoute(rt, m) {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// onRoute reports whether a key on route (a route name, or store.AutoRoute)
// may call m, excluding nothing.
func onRoute(route string, m pricing.Model) bool {
	if route == store.AutoRoute {
		return true
	}
	_, ok := m.Routes[route]
	return ok
}

func (b *consoleBackend) Lines() []console.Line { return b.a.d.ConsoleLines() }

func (b *consoleBackend) Plugins() []console.Plugin {
	ps := b.a.d.Plugins.Catalog().Plugins()
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
	err := b.a.d.Limit(ctx, "console:", bucket, rc, "too many failed sign-ins")
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
	return b.a.isAdminToken(tok)
}

func (b *consoleBackend) CreateAccount(ctx context.Context, id string) (store.Account, error) {
	if !validAccountID(id) {
		return store.Account{}, &console.Error{Status: http.StatusBadRequest, Field: "id", Message: "account id: 1–64 letters, digits, '-', '_' or '.'"}
	}
	return b.a.d.Store.CreateAccount(ctx, id)
}

func (b *consoleBackend) Credit(ctx context.Context, account string, usd pricing.Nano, note string) (store.Account, error) {
	if err := b.a.credit(ctx, account, usd, note); err != nil {
		return store.Account{}, consoleErr(err)
	}
	b.a.d.Settled(ctx, account)
	return b.a.d.Store.Balance(ctx, account)
}

func (b *consoleBackend) Settled(ctx context.Context, account string) { b.a.d.Settled(ctx, account) }
