package gateway

import (
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
)

// HeadersConfig says which of a provider's response headers reach the
// client. Bodies are never changed; headers that name the operator's
// upstream accounts or show their state are not forwarded.
type HeadersConfig struct {
	// Drop lists the upstream response headers never forwarded, by name,
	// case-insensitive; a name ending in "*" drops every header it
	// prefixes. Default DefaultDropHeaders; [] forwards them all. Hop-by-hop
	// headers, the headers the gateway sets itself (Content-Length, Date,
	// Server, X-Request-Id, X-Relay-Cost-Usd and the Access-Control-* of
	// CORS) are dropped whatever the list says.
	Drop []string `yaml:"drop"`
	// RequestIDs lists the headers in which a provider names its request
	// id; each is kept under UpstreamPrefix + its name, so that support can
	// trace a call upstream (X-Request-Id itself is the gateway's id).
	// Default ["x-request-id", "request-id"]; [] drops them.
	RequestIDs []string `yaml:"request_ids"`
	// UpstreamPrefix is put before those names. Default "upstream-"
	// (x-request-id → upstream-x-request-id).
	UpstreamPrefix string `yaml:"upstream_prefix"`
}

// DefaultDropHeaders are the upstream response headers not forwarded by
// default: the operator's organisation and project ids, the upstream
// account's rate-limit state (shared by every tenant of the line), cookies,
// and Alt-Svc (it points at the provider's own endpoints).
var DefaultDropHeaders = []string{
	"openai-organization", "openai-project", "anthropic-organization-id",
	"x-ratelimit-*", "anthropic-ratelimit-*",
	"set-cookie", "alt-svc",
}

func (h *HeadersConfig) resolve() error {
	if h.Drop == nil {
		h.Drop = DefaultDropHeaders
	}
	if h.RequestIDs == nil {
		h.RequestIDs = []string{"x-request-id", "request-id"}
	}
	if h.UpstreamPrefix == "" {
		h.UpstreamPrefix = "upstream-"
	}
	for i, n := range h.Drop {
		if !validHeaderName(strings.TrimSuffix(n, "*")) {
			return fmt.Errorf("config: headers.drop[%d]: %q is not a header name (a trailing * matches a prefix)", i, n)
		}
	}
	for i, n := range h.RequestIDs {
		if !validHeaderName(n) {
			return fmt.Errorf("config: headers.request_ids[%d]: %q is not a header name", i, n)
		}
	}
	if !validHeaderName(h.UpstreamPrefix) {
		return fmt.Errorf("config: headers.upstream_prefix: %q cannot start a header name", h.UpstreamPrefix)
	}
	return nil
}

// validHeaderName reports whether s is a non-empty HTTP token (RFC 9110 5.1).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// alwaysDropped are response headers never copied from upstream: hop-by-hop
// headers (RFC 9110 7.6.1) and those the gateway writes itself.
var alwaysDropped = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "Date": true, "Server": true, "X-Request-Id": true, "X-Relay-Cost-Usd": true,
	"Retry-After-Ms": true, "X-Should-Retry": true, // the gateway's retry hints (errors.go)
}

// headerFilter copies a provider's response headers to the client's answer
// as HeadersConfig says.
type headerFilter struct {
	drop     map[string]bool   // canonical names
	prefixes []string          // canonical prefixes, from names ending in "*"
	rename   map[string]string // canonical name → the name it is kept under
}

func newHeaderFilter(c HeadersConfig) *headerFilter {
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

// copyResponseHeaders copies a provider's response headers to the answer,
// cleaned (HeadersConfig).
func (g *Gateway) copyResponseHeaders(dst, src http.Header) { g.hdrs.copy(dst, src) }
