package gateway

import (
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"
)

// The web console (package console) is served under /console/ on the
// gateway's listener, or on console.listen (ConsoleHandler). Its backend
// is package admin's, so that a key made in the console follows the same
// rules as one made by POST /admin/keys.

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
