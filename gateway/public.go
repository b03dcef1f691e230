package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/julienschmidt/httprouter"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/openapi"
	"github.com/modelrelay/modelrelay/gateway/pricingpage"
	"github.com/modelrelay/modelrelay/plugins"
	"github.com/modelrelay/modelrelay/pricing"
)

// publicRoutes registers the endpoints that need no key (docs/api.md#authentication):
// GET /api/pricing, the price table (docs/api.md#prices), rate-limited per client
// address; GET /openapi.json, the OpenAPI 3.1 description; and GET /pricing,
// the price page.
func (g *Gateway) publicRoutes(r *httprouter.Router) {
	pt := &priceTable{}
	r.GET("/api/pricing", g.handle("pricing", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params, _ *reqInfo) error {
		if err := g.limits.allowAddr(req.Context(), clientAddr(req), g.now()); err != nil {
			return err
		}
		body, etag, err := pt.get(g.host.Catalog(), &g.cfg)
		if err != nil {
			return err
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Cache-Control", "no-cache") // a reloaded plugin changes it: revalidate with the ETag
		serveStatic(w, req, body, etag)
		return nil
	}))

	doc := openapi.Document()
	docTag := etagOf(doc)
	r.GET("/openapi.json", g.handle("openapi", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params, _ *reqInfo) error {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Access-Control-Allow-Origin", "*")
		serveStatic(w, req, doc, docTag)
		return nil
	}))

	page := pricingpage.Page()
	pageTag := etagOf(page)
	csp := pricingpage.ContentSecurityPolicy()
	r.GET("/pricing", g.handle("pricing_page", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params, _ *reqInfo) error {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		serveStatic(w, req, page, pageTag)
		return nil
	}))
}

// clientAddr is the address /api/pricing is rate-limited by: the host part
// of the connection's remote address. X-Forwarded-For is not trusted (any
// client could set it to dodge the limit), so behind a reverse proxy every
// client shares the proxy's bucket.
func clientAddr(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// priceTable caches the price-table document (docs/api.md#prices) of one catalogue. A plugin reload
// swaps the catalogue pointer, so the next request rebuilds the document and
// a dropped-in plugin's models show up without a restart.
type priceTable struct {
	mu   sync.Mutex
	cat  *plugins.Catalog
	body []byte
	etag string
}

func (p *priceTable) get(cat *plugins.Catalog, cfg *config.Config) ([]byte, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cat == p.cat && p.body != nil {
		return p.body, p.etag, nil
	}
	models := cat.Models()
	for i := range models {
		models[i].Endpoints = servedEndpoints(cfg, models[i], "")
	}
	body, err := pricing.MarshalTable(models)
	if err != nil {
		return nil, "", apierr.Internal("price_table_error", "the price table cannot be built: %v", err)
	}
	p.cat, p.body, p.etag = cat, body, etagOf(body)
	return body, p.etag, nil
}

// etagOf is a strong ETag of body.
func etagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// serveStatic writes body with its ETag, or 304 Not Modified without a body
// when the request's If-None-Match names that ETag.
func serveStatic(w http.ResponseWriter, r *http.Request, body []byte, etag string) {
	h := w.Header()
	h.Set("ETag", etag)
	if etagMatches(r.Header.Values("If-None-Match"), etag) {
		h.Del("Content-Type")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// etagMatches applies If-None-Match (RFC 9110 13.1.2, weak comparison): a
// comma-separated list of entity tags, or "*".
func etagMatches(headers []string, etag string) bool {
	for _, h := range headers {
		for _, t := range strings.Split(h, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == etag {
				return true
			}
		}
	}
	return false
}
