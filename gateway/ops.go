package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/wire"
)

// OpsHandler serves the operator endpoints (metrics, health, readiness) that
// need no sk- key; serve it on a separate address with metrics_listen.
func (g *Gateway) OpsHandler() http.Handler {
	r := httprouter.New()
	g.opsRoutes(r)
	return r
}

func (g *Gateway) opsRoutes(r *httprouter.Router) {
	mh := g.met.handler()
	r.GET("/metrics", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params) { mh.ServeHTTP(w, req) })
	r.GET("/healthz", func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
		_ = wire.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.GET("/readyz", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params) {
		problems := g.readiness(req.Context())
		if len(problems) > 0 {
			_ = wire.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "problems": problems})
			return
		}
		_ = wire.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
}

// readiness: the store answers, plugins are loaded, and every model sold has
// at least one configured line on each of its routes.
func (g *Gateway) readiness(ctx context.Context) []string {
	var problems []string
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if p, ok := g.store.(interface{ Ping(context.Context) error }); ok {
		if err := p.Ping(ctx); err != nil {
			problems = append(problems, "store: "+err.Error())
		}
	} else if _, err := g.store.Balance(ctx, "readiness-probe"); err != nil && !errors.Is(err, store.ErrNotFound) {
		// Any answer from the store, "not found" included, shows it is open.
		problems = append(problems, "store: "+err.Error())
	}
	models := g.host.Catalog().Models()
	if len(models) == 0 {
		problems = append(problems, "plugins: no model is loaded")
	}
	for _, m := range models {
		found := false
		for _, l := range g.lines.All() {
			if l.Serves(m.ID) {
				if _, ok := m.Routes[l.Config().Route]; ok {
					found = true
					break
				}
			}
		}
		if !found {
			problems = append(problems, "lines: no line serves "+m.ID)
		}
	}
	return problems
}
