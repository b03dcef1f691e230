package shared

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/modelrelay/modelrelay/internal/clip"
)

// URLEnv is the environment variable that gives the Redis URL when the
// configuration does not.
const URLEnv = "RELAY_REDIS_URL"

// Config is the redis: section of the configuration.
type Config struct {
	// URL is the Redis server, e.g. redis://127.0.0.1:6379/0 (rediss:// for
	// TLS); empty takes $RELAY_REDIS_URL. Absent: no sharing, every replica
	// keeps its own limits, key cache and cooldowns.
	URL string `yaml:"url"`
	// Prefix starts every key and channel name, so that several
	// deployments can share one Redis. Default "relay:".
	Prefix string `yaml:"prefix"`
	// FailClosed answers 503 to rate-limited requests while Redis is
	// unavailable, instead of enforcing per-replica limits. Default false.
	FailClosed bool `yaml:"fail_closed"`
	// Replicas is how many replicas share this Redis. While Redis is
	// unavailable each replica enforces 1/Replicas of every global rate
	// and burst on its own, so that together they stay near the global
	// limit. Default 1 (each enforces the whole limit).
	Replicas int `yaml:"replicas"`
	// Timeout bounds each command. Default 100ms: Redis answers in well
	// under a millisecond on a healthy network; past this it counts as down.
	Timeout time.Duration `yaml:"timeout"`
}

// Enabled says whether a Redis is configured.
func (c Config) Enabled() bool { return c.URL != "" }

// Resolve applies the defaults and checks the values; getenv is os.Getenv
// when nil.
func (c *Config) Resolve(getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	if c.URL == "" {
		c.URL = getenv(URLEnv)
	}
	if c.Prefix == "" {
		c.Prefix = "relay:"
	}
	if len(c.Prefix) > 64 || strings.ContainsAny(c.Prefix, " \t\r\n*?[]") {
		return fmt.Errorf("redis.prefix: %q must be at most 64 characters without spaces or glob characters", clip.Text(c.Prefix, 64))
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Replicas < 0 {
		return fmt.Errorf("redis.replicas: %d is negative", c.Replicas)
	}
	if c.Timeout == 0 {
		c.Timeout = 100 * time.Millisecond
	}
	if c.Timeout < time.Millisecond || c.Timeout > 5*time.Second {
		return fmt.Errorf("redis.timeout: %s is not between 1ms and 5s", c.Timeout)
	}
	if c.URL == "" {
		if c.FailClosed {
			return fmt.Errorf("redis.fail_closed: set, but no redis.url (or %s)", URLEnv)
		}
		return nil
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix") {
		return fmt.Errorf("redis.url: not a redis://, rediss:// or unix:// URL")
	}
	return nil
}
