package config

import (
	"errors"
	"fmt"
	"strings"
	"time"
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

func (c *CORSConfig) Resolve() error {
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
