package gateway

import (
	"net/http"
	"strings"
	"time"

	"github.com/rs/cors"

	"github.com/modelrelay/modelrelay/gateway/config"
)

// corsExposed are the answer's headers a page may read besides the
// provider's request ids (headerFilter.renamed): the gateway's request id,
// a call's charge (relayJSON) and the retry hints the SDKs use (apierr.Error
// retryHints).
var corsExposed = []string{"X-Request-Id", costHeader, "Retry-After", "Retry-After-Ms", "X-Should-Retry"}

// withCORS answers browser preflights (OPTIONS with
// Access-Control-Request-Method) on /v1/* with 204, before any key is
// asked for, and sets the CORS headers on every other /v1/* answer whose
// Origin is allowed, exposing the headers named. Other paths pass through untouched: /api/pricing and
// /openapi.json set their own.
func withCORS(c config.CORSConfig, exposed []string, next http.Handler) http.Handler {
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
