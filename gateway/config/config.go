// Package config is the gateway's configuration, read from relay.yaml:
// its types, their defaults and their validation, each error naming its
// key. It imports the sections other packages own (store, plugins, shared,
// memlimit, console) and nothing of the gateway's, so every package of the
// gateway can read the settings it needs.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/modelrelay/modelrelay/gateway/console"
	"github.com/modelrelay/modelrelay/internal/memlimit"
	"github.com/modelrelay/modelrelay/internal/shared"
	"github.com/modelrelay/modelrelay/plugins"
	"github.com/modelrelay/modelrelay/store"
)

// Config is the gateway's configuration, read from relay.yaml. The zero value
// of every optional field works: its default is written in its comment.
// Each section's defaults and validation sit with its type: the gateway's
// own in this package, one file per section; store:, data_dir and
// sync_writes in package store, plugins: in package plugins, redis: in
// package shared, memory_limit in package memlimit. cmd/relay hands each
// section to what it configures.
type Config struct {
	// Listen is the gateway's address. Default "127.0.0.1:8080".
	Listen string `yaml:"listen"`
	// MetricsListen, when set, serves /metrics, /healthz and /readyz on a
	// separate address as well. Default "" (served on Listen only).
	MetricsListen string `yaml:"metrics_listen"`
	// DebugListen, when set, serves the Go profiler (net/http/pprof, under
	// /debug/pprof/) and nothing else on its own address; never on Listen.
	// It exposes the process's internals: bind it to a loopback or private
	// address. Default "" (off).
	DebugListen string `yaml:"debug_listen"`
	// SupportEmail is quoted in every error message. Default "support@modelrelay.local".
	SupportEmail string `yaml:"support_email"`
	// AdminToken authorises /admin/. Either AdminToken or AdminTokenEnv (the
	// name of an environment variable holding it) must be set; it must not
	// start with "sk-".
	AdminToken    string `yaml:"admin_token"`
	AdminTokenEnv string `yaml:"admin_token_env"`
	// LocalConfig holds data_dir and sync_writes (package store).
	store.LocalConfig `yaml:",inline"`
	// Memory holds memory_limit (package memlimit); cmd/relay applies it.
	Memory memlimit.Config `yaml:",inline"`

	// Store names the store: Badger in DataDir (default) or PostgreSQL.
	Store store.Config `yaml:"store"`
	// Redis, when its url is set, is shared by the replicas: rate limits,
	// key revocations, upstream cooldowns and read-after-answer hold across
	// them (package shared).
	Redis shared.Config `yaml:"redis"`
	// Plugins says where plugins live and how the host runs them.
	Plugins plugins.Settings `yaml:"plugins"`
	Billing BillingConfig    `yaml:"billing"`
	Limits  LimitsConfig     `yaml:"limits"`
	Server  ServerConfig     `yaml:"server"`
	Retry   RetryConfig      `yaml:"retry"`
	Headers HeadersConfig    `yaml:"headers"`
	CORS    CORSConfig       `yaml:"cors"`
	// Console is the web console (package console): on by default under
	// /console/ on Listen.
	Console console.Config `yaml:"console"`
	Routes  []RouteConfig  `yaml:"routes"`
	Lines   []LineConfig   `yaml:"lines"`
	// Serve widens the endpoints text models answer on (translation).
	Serve []ServeConfig `yaml:"serve"`
}

// BillingConfig tunes admission.
type BillingConfig struct {
	// DefaultOutputTokens is the output budget held for a call that names no
	// max_tokens. Default 4096.
	DefaultOutputTokens int64 `yaml:"default_output_tokens"`
	// OverlapHold lets a hold's commit run beside the upstream request on
	// PostgreSQL, for an account that plainly has the credit (billing/overlap.go).
	// Default true; false holds every call before it goes upstream. Badger
	// holds in memory and never overlaps.
	OverlapHold *bool `yaml:"overlap_hold"`
	// Allot lets calls that may overlap their hold be admitted in memory
	// against an allotment of the account's credit this replica holds in
	// PostgreSQL (billing/allot.go). Default true; false holds each such call in
	// the database beside its upstream request. Needs overlap_hold.
	Allot *bool `yaml:"allot"`
	// MaxStoreBacklog is how many ledger writes (holds, carves, settles,
	// releases) may be in the store's queue or being sent before new calls
	// are refused with 503 store_unavailable (gateway/backlog); a write
	// waiting to be tried again is not counted. Default
	// DefaultMaxStoreBacklog; -1: no bound.
	MaxStoreBacklog int `yaml:"max_store_backlog"`
	// MaxStoreWait is how long the oldest ledger write under way may have
	// waited before new calls are refused the same way. Default
	// DefaultMaxStoreWait; -1s: no bound.
	MaxStoreWait time.Duration `yaml:"max_store_wait"`
}

// Defaults of billing.max_store_backlog and billing.max_store_wait
// (RATIONALE.md, "A store that falls behind").
const (
	DefaultMaxStoreBacklog = 4096
	DefaultMaxStoreWait    = time.Second
)

// replacedKeys are configuration keys that are gone, with what replaced
// them: a config that still names one fails saying so.
var replacedKeys = map[string]string{
	"breaker_failures": "retry.breaker_failures is replaced by retry.breaker_failure_ratio, retry.breaker_min_requests and retry.breaker_window (a breaker opens on a failure ratio over a window, not on consecutive failures)",
}

// Load reads and validates a YAML config file. Unknown keys and invalid
// values fail with a message naming the key.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return Parse(data)
}

// ParseConfig parses and validates YAML config text.
func Parse(data []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		msg := nameKeys(data, err)
		for k, why := range replacedKeys {
			if strings.Contains(msg, "field "+k+" not found") {
				msg += "; " + why
			}
		}
		return Config{}, fmt.Errorf("config: %s", msg)
	}
	if err := c.Resolve(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Resolve fills defaults, reads environment variables and validates, one
// section after another; the first error ends it, naming its key. It is
// idempotent.
func (c *Config) Resolve() error {
	c.resolveAddresses()
	if err := c.LocalConfig.Resolve(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.Memory.Resolve(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.resolveAdminToken(); err != nil {
		return err
	}
	if err := c.Plugins.Resolve(c.DataDir); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.Billing.resolve(); err != nil {
		return err
	}
	if err := c.Limits.resolve(); err != nil {
		return err
	}
	if err := c.Store.Resolve(nil); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.Redis.Resolve(nil); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	for _, resolve := range []func() error{c.Server.resolve, c.Retry.resolve, c.Headers.Resolve, c.CORS.Resolve, c.Console.Resolve, c.resolveRoutes} {
		if err := resolve(); err != nil {
			return err
		}
	}
	if err := c.resolveLines(); err != nil {
		return err
	}
	routes := map[string]bool{}
	for _, rt := range c.Routes {
		routes[rt.Name] = true
	}
	return c.resolveServe(routes)
}

// resolveAddresses fills the defaults of the addresses the gateway shows:
// where it listens and the support address its error messages quote.
func (c *Config) resolveAddresses() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.SupportEmail == "" {
		c.SupportEmail = "support@modelrelay.local"
	}
}

// resolveAdminToken reads the admin token from its environment variable
// when named, and refuses a token that is missing, short, or shaped like
// an API key.
func (c *Config) resolveAdminToken() error {
	if c.AdminTokenEnv != "" && c.AdminToken == "" {
		c.AdminToken = os.Getenv(c.AdminTokenEnv)
		if c.AdminToken == "" {
			return fmt.Errorf("config: admin_token_env: environment variable %s is empty", c.AdminTokenEnv)
		}
	}
	if c.AdminToken == "" {
		return errors.New("config: admin_token: set admin_token or admin_token_env")
	}
	if strings.HasPrefix(c.AdminToken, "sk-") {
		return errors.New("config: admin_token: must not start with sk- (it would look like an API key)")
	}
	if len(c.AdminToken) < 16 {
		return errors.New("config: admin_token: must be at least 16 characters")
	}
	return nil
}

func (b *BillingConfig) resolve() error {
	if b.DefaultOutputTokens == 0 {
		b.DefaultOutputTokens = 4096
	}
	if b.DefaultOutputTokens < 0 {
		return errors.New("config: billing.default_output_tokens: must be positive")
	}
	if b.OverlapHold == nil {
		t := true
		b.OverlapHold = &t
	}
	if b.Allot == nil {
		t := true
		b.Allot = &t
	}
	switch {
	case b.MaxStoreBacklog == 0:
		b.MaxStoreBacklog = DefaultMaxStoreBacklog
	case b.MaxStoreBacklog < -1:
		return fmt.Errorf("config: billing.max_store_backlog: %d is not a count of writes (or -1: no bound)", b.MaxStoreBacklog)
	}
	switch {
	case b.MaxStoreWait == 0:
		b.MaxStoreWait = DefaultMaxStoreWait
	case b.MaxStoreWait < 0 && b.MaxStoreWait != -time.Second:
		return fmt.Errorf("config: billing.max_store_wait: %s is negative (-1s: no bound)", b.MaxStoreWait)
	}
	return nil
}

var lineRe = regexp.MustCompile(`line (\d+): `)

// nameKeys rewrites a YAML error so that each "line N:" also names the key
// at that line (yaml.v3 reports type errors by line only).
func nameKeys(data []byte, err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return msg
	}
	return lineRe.ReplaceAllStringFunc(msg, func(m string) string {
		n, _ := strconv.Atoi(lineRe.FindStringSubmatch(m)[1])
		if key := keyAtLine(&root, n, ""); key != "" {
			return m + key + ": "
		}
		return m
	})
}

// keyAtLine finds the dotted path of the mapping key whose value sits on line.
func keyAtLine(n *yaml.Node, line int, path string) string {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if k := keyAtLine(c, line, path); k != "" {
				return k
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			if v.Kind == yaml.ScalarNode && v.Line == line {
				return p
			}
			if sub := keyAtLine(v, line, p); sub != "" {
				return sub
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if c.Kind == yaml.ScalarNode && c.Line == line {
				return p
			}
			if sub := keyAtLine(c, line, p); sub != "" {
				return sub
			}
		}
	}
	return ""
}
