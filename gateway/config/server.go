package config

import (
	"fmt"
	"time"
)

// ServerConfig bounds what a client can hold of the gateway: a deadline for
// each phase of a request and a bound on open connections (package listen).
type ServerConfig struct {
	// HeaderTimeout bounds the wait for a request's line and headers; the
	// connection is closed without an answer when it passes. Default 10s.
	HeaderTimeout time.Duration `yaml:"header_timeout"`
	// BodyTimeout bounds the time to receive a whole request, headers and
	// body, from its start; a body still arriving then is answered 408
	// body_timeout and the connection closed. Default 120s: the largest
	// upload, a 32 MiB image edit, over a 2.5 Mbit/s uplink. Once the body
	// is read the deadline is lifted, so it never cuts an answer or a stream.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// IdleTimeout closes a kept-alive connection that has carried no
	// request for this long. Default 120s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConnections bounds the open client connections; past it a new
	// connection is answered 503 at once and closed. Default (the
	// open-file limit − 64) / 2, at least 64: a relayed call holds two
	// descriptors, the client's and the provider's. Negative: unbounded.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerAddress bounds the open connections from one client
	// IP address, the same way. Default 512; negative: unbounded. Behind a
	// load balancer every connection comes from its address.
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
}

func (s *ServerConfig) resolve() error {
	if s.HeaderTimeout == 0 {
		s.HeaderTimeout = 10 * time.Second
	}
	if s.BodyTimeout == 0 {
		s.BodyTimeout = 120 * time.Second
	}
	if s.IdleTimeout == 0 {
		s.IdleTimeout = 120 * time.Second
	}
	for _, t := range []struct {
		key string
		d   time.Duration
	}{{"header_timeout", s.HeaderTimeout}, {"body_timeout", s.BodyTimeout}, {"idle_timeout", s.IdleTimeout}} {
		if t.d < 0 {
			return fmt.Errorf("config: server.%s: must be positive", t.key)
		}
	}
	if s.BodyTimeout < s.HeaderTimeout {
		return fmt.Errorf("config: server.body_timeout: %s is below server.header_timeout (%s); it counts from the request's start, headers included", s.BodyTimeout, s.HeaderTimeout)
	}
	if s.MaxConnections == 0 {
		s.MaxConnections = defaultMaxConnections()
	}
	if s.MaxConnectionsPerAddress == 0 {
		s.MaxConnectionsPerAddress = 512
	}
	return nil
}

// maxConnectionsFor is server.max_connections' default for an open-file
// limit of nofile (see defaultMaxConnections).
func maxConnectionsFor(nofile uint64) int {
	const headroom, least, most = 64, 64, 1 << 24
	if nofile < headroom+2*least {
		return least
	}
	return int(min((nofile-headroom)/2, most))
}
