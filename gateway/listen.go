package gateway

import (
	"net"
	"net/http"

	"github.com/modelrelay/modelrelay/gateway/listen"
)

// The connection bounds and request deadlines are package listen's; these
// are the gateway's entry points to them.

// Listener wraps ln, the gateway's client listener, in the bounds on open
// connections (server.max_connections, server.max_connections_per_address;
// see listen.Bounds.Listener). Serve it with a server ConfigureServer has
// set up.
func (g *Gateway) Listener(ln net.Listener) net.Listener { return g.conns.Listener(ln) }

// ConfigureServer sets s's deadlines from the server section of the
// configuration (listen.ConfigureServer). Serve s on Listener(ln) so that
// answers given without reading the body close their connection gently.
func (g *Gateway) ConfigureServer(s *http.Server) { listen.ConfigureServer(s, g.cfg.Server) }

// MarkBodyRead records that the handler read the request body to its end
// (listen.BodyRead calls it).
func (s *statusWriter) MarkBodyRead() { s.bodyRead = true }
