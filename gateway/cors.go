package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rs/cors"
)

// CORSConfig sets the CORS answers of /v1/*, so that a web page can call
// the API (a browser client, a tool that checks a key from a page).
// Credentials (cookies) are never allowed: the key travels in a header.
type CORSConfig struct {
	// Disable turns CORS off: /v1/* answers no preflight and sets no
	// Access-Control-* header. Default false.
	Disable bool `yaml:"disable"`
	// Origins lists the origins allowed to call /v1/* from a browser: "*"
	// for any, or e.g. "https://app.example.com", with at most one "*"
	// inside ("https://*.example.com"). Default ["*"].
	Origins []string `yaml:"origins"`
	// MaxAge is how long a browser may reuse a preflight answer. Default 10m.
	MaxAge time.Duration `yaml:"max_age"`
}

func (c *CORSConfig) resolve() error {
	if c.Origins == nil {
		c.Origins = []string{"*"}
	}
	if c.MaxAge == 0 {
		c.MaxAge = 10 * time.Minute
	}
	if c.MaxAge < time.Second {
		return errors.New("config: cors.max_age: must be at least 1s")
	}
	for i, o := range c.Origins {
		if o == "" || strings.Count(o, "*") > 1 || o != "*" && !strings.Contains(o, "://") {
			return fmt.Errorf("config: cors.origins[%d]: %q is not an origin (\"*\", or scheme://host[:port] with at most one *)", i, o)
		}
	}
	return nil
}

// corsExposed are the answer's headers a page may read besides the
// provider's request ids (headerFilter.renamed): the gateway's request id,
// a call's charge (relayJSON) and the retry hints the SDKs use (errors.go
// retryHints).
var corsExposed = []string{"X-Request-Id", costHeader, "Retry-After", "Retry-After-Ms", "X-Should-Retry"}

// withCORS answers browser preflights (OPTIONS with
// Access-Control-Request-Method) on /v1/* with 204, before any key is
// asked for, and sets the CORS headers on every other /v1/* answer whose
// Origin is allowed, exposing the headers named. Other paths pass through untouched: /api/pricing and
// /openapi.json set their own.
func withCORS(c CORSConfig, exposed []string, next http.Handler) http.Handler {
	if c.Disable {
		return next
	}
	h := cors.New(cors.Options{
		AllowedOrigins: c.Origins,
		AllowedMethods: []string{http.MethodGet, http.MethodPost},
		AllowedHeaders: []string{"*"}, // any the request names: keys, version headers, SDK headers
		ExposedHeaders: exposed,
		MaxAge:         int(c.MaxAge / time.Second),
	}).Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
