package gateway

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	"github.com/modelrelay/modelrelay/gateway/config"
)

// alwaysDropped are response headers never copied from upstream: hop-by-hop
// headers (RFC 9110 7.6.1) and those the gateway writes itself.
var alwaysDropped = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "Date": true, "Server": true, "X-Request-Id": true, "X-Relay-Cost-Usd": true,
	"Retry-After-Ms": true, "X-Should-Retry": true, // the gateway's retry hints (package apierr)
}

// headerFilter copies a provider's response headers to the client's answer
// as HeadersConfig says.
type headerFilter struct {
	drop     map[string]bool   // canonical names
	prefixes []string          // canonical prefixes, from names ending in "*"
	rename   map[string]string // canonical name → the name it is kept under
}

func newHeaderFilter(c config.HeadersConfig) *headerFilter {
	f := &headerFilter{drop: map[string]bool{}, rename: map[string]string{}}
	for _, n := range c.Drop {
		if p, ok := strings.CutSuffix(n, "*"); ok {
			f.prefixes = append(f.prefixes, textproto.CanonicalMIMEHeaderKey(p))
		} else {
			f.drop[textproto.CanonicalMIMEHeaderKey(n)] = true
		}
	}
	f.prefixes = append(f.prefixes, "Access-Control-") // CORS is the gateway's (cors.go)
	for _, n := range c.RequestIDs {
		f.rename[textproto.CanonicalMIMEHeaderKey(n)] = textproto.CanonicalMIMEHeaderKey(c.UpstreamPrefix + n)
	}
	return f
}

// copy sets src's headers on dst, but those dropped; a request id is set
// under its new name; Vary adds to what dst has (CORS sets Vary: Origin).
func (f *headerFilter) copy(dst, src http.Header) {
	var hop []string // the headers src's Connection names are hop-by-hop too
	for _, v := range src["Connection"] {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				hop = append(hop, textproto.CanonicalMIMEHeaderKey(t))
			}
		}
	}
	for k, vs := range src {
		k = textproto.CanonicalMIMEHeaderKey(k)
		if to, ok := f.rename[k]; ok {
			dst[to] = vs
			continue
		}
		if alwaysDropped[k] || f.drop[k] || contains(hop, k) || f.prefixed(k) {
			continue
		}
		if k == "Vary" {
			dst[k] = append(dst[k][:len(dst[k]):len(dst[k])], vs...)
			continue
		}
		dst[k] = vs
	}
}

// renamed lists the names request ids are kept under.
func (f *headerFilter) renamed() []string {
	out := make([]string, 0, len(f.rename))
	for _, to := range f.rename {
		out = append(out, to)
	}
	slices.Sort(out)
	return out
}

func (f *headerFilter) prefixed(k string) bool {
	for _, p := range f.prefixes {
		if len(k) >= len(p) && strings.EqualFold(k[:len(p)], p) {
			return true
		}
	}
	return false
}
