package config

import (
	"fmt"
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

func (h *HeadersConfig) Resolve() error {
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
