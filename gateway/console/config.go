package console

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Config is the console's part of relay.yaml (key console). The zero value
// works: the console is on, on the gateway's listener.
type Config struct {
	// Enabled turns the console on. Default true; false answers 404 under
	// /console/.
	Enabled *bool `yaml:"enabled"`
	// Listen, when set, serves the console on its own address instead of
	// the gateway's listener (relay serve starts it). Default "".
	Listen string `yaml:"listen"`
	// PublicURL is the base of the set-password links the operator hands
	// out, e.g. "https://relay.example.com" (the link is
	// <public_url>/console/setup/<token>). Default "": the address the
	// request that issued the login came to.
	PublicURL string `yaml:"public_url"`
	// IdleTimeout ends a session unused for this long. Default 30m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxAge ends a session this long after sign-in, used or not. Default 12h.
	MaxAge time.Duration `yaml:"max_age"`
}

// On reports whether the console is served.
func (c Config) On() bool { return c.Enabled == nil || *c.Enabled }

// Resolve fills the defaults and validates; errors name the key.
func (c *Config) Resolve() error {
	if c.Enabled == nil {
		t := true
		c.Enabled = &t
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 30 * time.Minute
	}
	if c.MaxAge == 0 {
		c.MaxAge = 12 * time.Hour
	}
	if c.IdleTimeout < time.Minute {
		return fmt.Errorf("config: console.idle_timeout: %s is below 1m", c.IdleTimeout)
	}
	if c.MaxAge < c.IdleTimeout {
		return fmt.Errorf("config: console.max_age: %s is below console.idle_timeout (%s)", c.MaxAge, c.IdleTimeout)
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("config: console.public_url: %q is not an http(s) URL such as https://relay.example.com", c.PublicURL)
		}
		c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	}
	return nil
}
