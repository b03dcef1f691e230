package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"
	"golang.org/x/time/rate"

	"github.com/modelrelay/modelrelay/gateway/admin"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/console"
	"github.com/modelrelay/modelrelay/gateway/lines"
)

// The admin API and the console's backend are package admin's; the
// gateway hands it what it needs of the running gateway and mounts its
// routes through handle.

// adminAPI is the admin API over this gateway: its store, catalogue and
// lines, its key cache and the replicas' revocation, the settling of
// calls and the limiter (for the console's sign-ins).
func (g *Gateway) adminAPI() *admin.API {
	buckets := map[string]*rate.Limiter{} // local sign-in buckets (under limiters.mu)
	return admin.New(admin.Deps{
		Config: g.cfg, Store: g.store, Plugins: g.host, Logger: g.log, Now: g.now,
		Lines:        func() any { return g.lines.Health() },
		ConsoleLines: func() []console.Line { return consoleLines(g.lines) },
		Evict:        g.keys.evictID,
		Publish:      g.publishKey,
		Settled:      g.bill.WaitSettled,
		Limit: func(ctx context.Context, kind, id string, rc config.RateConfig, msg string) error {
			return g.limits.allow(ctx, buckets, kind, id, rc, g.now(), msg)
		},
	})
}

// adminRoutes mounts the admin API (/admin/*) on r through handle.
func (g *Gateway) adminRoutes(r *httprouter.Router) {
	g.adminAPI().Routes(r, func(name string, h admin.Handler) httprouter.Handle {
		return g.handle(name, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ *reqInfo) error {
			return h(w, r, ps)
		})
	})
}

// consoleLines is the lines' health as the console shows it.
func consoleLines(ls *lines.Set) []console.Line {
	hs := ls.Health()
	out := make([]console.Line, len(hs))
	for i, h := range hs {
		l := console.Line{Name: h.Name, Route: h.Route, Protocol: h.Protocol, Models: h.Models, Breaker: h.Breaker,
			Requests: h.Requests, Failures: h.Failures, Latency: ls.ByName(h.Name).Latency().Round(100 * time.Microsecond)}
		for _, f := range h.RecentFailures {
			l.RecentFailures = append(l.RecentFailures, console.LineFailure{Time: f.Time, Error: f.Error})
		}
		out[i] = l
	}
	return out
}
