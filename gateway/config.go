package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/modelrelay/modelrelay/internal/memlimit"
	"github.com/modelrelay/modelrelay/internal/shared"
	"github.com/modelrelay/modelrelay/plugins"
	"github.com/modelrelay/modelrelay/store"
)

// Config is the gateway's configuration, read from relay.yaml. The zero value
// of every optional field works: its default is written in its comment.
type Config struct {
	// Listen is the gateway's address. Default "127.0.0.1:8080".
	Listen string `yaml:"listen"`
	// MetricsListen, when set, serves /metrics, /healthz and /readyz on a
	// separate address as well. Default "" (served on Listen only).
	MetricsListen string `yaml:"metrics_listen"`
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
	Routes  []RouteConfig    `yaml:"routes"`
	Lines   []LineConfig     `yaml:"lines"`
}

// BillingConfig tunes admission.
type BillingConfig struct {
	// DefaultOutputTokens is the output budget held for a call that names no
	// max_tokens. Default 4096.
	DefaultOutputTokens int64 `yaml:"default_output_tokens"`
}

// LimitsConfig holds request limits and rate limits.
type LimitsConfig struct {
	// MaxBodyBytes caps a request body. Default 16 MiB (the typed-question
	// endpoint is always capped at 1 MiB, spec 4.2.7).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// KeyRate is the default token bucket per key. Default 50/s, burst 100.
	KeyRate RateConfig `yaml:"key_rate"`
	// PricingRate is the token bucket per client address on /api/pricing.
	// Default 5/s, burst 20.
	PricingRate RateConfig `yaml:"pricing_rate"`
	// OverloadDelay is the queueing delay (how long the gateway's goroutines
	// wait for a CPU: the 99th percentile of each 25 ms window) past which,
	// once it has lasted 100 ms, a growing share of new relayed calls is
	// refused with 503 "overloaded" and Retry-After: 1 (shed.go). Default
	// 100ms; negative never sheds.
	OverloadDelay time.Duration `yaml:"overload_delay"`
}

// ServerConfig bounds what a client can hold of the gateway: a deadline for
// each phase of a request and a bound on open connections (listen.go).
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

// RateConfig is a token bucket: Rate tokens per second, up to Burst.
type RateConfig struct {
	Rate  float64 `yaml:"rate"`
	Burst int     `yaml:"burst"`
}

// RetryConfig bounds the tries of one call across lines, the circuit
// breaker of each line, the retries of the whole gateway, and what happens
// when every line of a pool is open (see README "Failing well").
type RetryConfig struct {
	// MaxTries is the most upstream attempts per call. Default 0: one per
	// line of the call's plan, and at least 3.
	MaxTries int `yaml:"max_tries"`
	// MaxTime is the most time spent trying before the first byte. Default 30s.
	MaxTime time.Duration `yaml:"max_time"`
	// BackoffMin and BackoffMax bound the wait before trying the same line
	// again. Defaults 10ms and 500ms.
	BackoffMin time.Duration `yaml:"backoff_min"`
	BackoffMax time.Duration `yaml:"backoff_max"`
	// BreakerFailureRatio is the share of failed tries, over BreakerWindow,
	// that opens a line's breaker. Default 0.8: a line failing every request
	// opens after BreakerMinRequests tries; a line failing half at random
	// practically never does (0.65% while its first 20 tries come in).
	BreakerFailureRatio float64 `yaml:"breaker_failure_ratio"`
	// BreakerMinRequests is how many tries must have finished on a line
	// within BreakerWindow before its failure ratio can open it. Default 20.
	BreakerMinRequests uint32 `yaml:"breaker_min_requests"`
	// BreakerWindow is the rolling window (in ten buckets) the failure
	// ratio, and the success ratio that ranks lines in panic mode, are
	// counted over. Default 10s.
	BreakerWindow time.Duration `yaml:"breaker_window"`
	// BreakerOpen is how long a breaker stays open before one half-open
	// probe. Default 10s.
	BreakerOpen time.Duration `yaml:"breaker_open"`
	// BudgetRatio bounds the retries of the whole gateway: over the last 10
	// seconds, retries ≤ BudgetRatio × first tries + BudgetMinPerSecond × 10.
	// A call past it does not retry and answers with its last failure.
	// Default 1.0 (retries at most double the load on a sick pool; a pool
	// failing half its requests needs 0.75 retries per call with 3 tries).
	BudgetRatio float64 `yaml:"budget_ratio"`
	// BudgetMinPerSecond is the floor of the retry budget, so that a
	// quiet gateway can still retry. Default 10; negative: no floor.
	BudgetMinPerSecond float64 `yaml:"budget_min_per_second"`
	// PanicShare is the share of calls still sent, when every line serving
	// a call is open, to the lines that succeeded within BreakerWindow,
	// best success ratio first (Envoy's panic mode). Default 0.5; 0 turns
	// panic mode off (every such call gets 503 at once).
	PanicShare *float64 `yaml:"panic_share"`
	// Max429Wait is the longest Retry-After (or retry-after-ms) of a
	// provider's 429 that the gateway waits out itself, when no other line
	// of the plan can take the call, before trying that line again; a
	// longer one reaches the caller as 429 with its Retry-After. The wait
	// must also fit in what is left of MaxTime, and the try after it counts
	// against MaxTries and the retry budget. Default 10s; negative: a 429
	// is never waited out.
	Max429Wait time.Duration `yaml:"max_429_wait"`
	// AffinityTTL is how long a conversation (a call with a
	// prompt_cache_key, an Anthropic metadata.user_id, or a session_id or
	// x-claude-code-session-id header) remembers the line that last
	// answered it: its next calls go to that line first while its breaker
	// allows, so the provider's prompt cache of that account is hit. At most
	// 100,000 conversations are remembered. Default 1h (the longest prompt
	// cache lifetime providers offer); negative: no affinity.
	AffinityTTL time.Duration `yaml:"affinity_ttl"`
}

// replacedKeys are configuration keys that are gone, with what replaced
// them: a config that still names one fails saying so.
var replacedKeys = map[string]string{
	"breaker_failures": "retry.breaker_failures is replaced by retry.breaker_failure_ratio, retry.breaker_min_requests and retry.breaker_window (a breaker opens on a failure ratio over a window, not on consecutive failures)",
}

// RouteConfig is a named route. Its prices come from the plugins.
type RouteConfig struct {
	Name string `yaml:"name"`
	// Rate overrides the key rate limit for keys on this route.
	Rate *RateConfig `yaml:"rate"`
}

// LineConfig is one upstream connection.
type LineConfig struct {
	Name string `yaml:"name"`
	// Protocol is "openai" (chat, responses, images, videos, typed questions)
	// or "anthropic" (messages).
	Protocol string `yaml:"protocol"`
	// BaseURL is the provider's base, without /v1, e.g. "http://127.0.0.1:9090".
	BaseURL string `yaml:"base_url"`
	// KeyEnv names the environment variable holding the upstream key ("" = none).
	KeyEnv string `yaml:"key_env"`
	// Models served by this line; "*" serves every model of its route.
	Models   []string `yaml:"models"`
	Route    string   `yaml:"route"`
	Priority int64    `yaml:"priority"` // lower is tried first; default 0
	Weight   int64    `yaml:"weight"`   // share within a priority; default 1
	Timeouts Timeouts `yaml:"timeouts"`

	key string // resolved from KeyEnv at load
}

// Timeouts of one line.
type Timeouts struct {
	// Connect bounds dialing. Default 5s.
	Connect time.Duration `yaml:"connect"`
	// FirstByte bounds the wait for response headers. Default 120s.
	FirstByte time.Duration `yaml:"first_byte"`
	// Idle bounds the gap between two stream chunks (and body reads). Default 120s.
	Idle time.Duration `yaml:"idle"`
}

// Protocols a line may speak.
const (
	ProtocolOpenAI    = "openai"
	ProtocolAnthropic = "anthropic"
)

// LoadConfig reads and validates a YAML config file. Unknown keys and invalid
// values fail with a message naming the key.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(data)
}

// ParseConfig parses and validates YAML config text.
func ParseConfig(data []byte) (Config, error) {
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
// section after another in the order a reader meets them; the first error
// ends it, naming its key. It is idempotent.
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
	for _, resolve := range []func() error{c.Server.resolve, c.Retry.resolve, c.Headers.resolve, c.CORS.resolve, c.resolveRoutes} {
		if err := resolve(); err != nil {
			return err
		}
	}
	return c.resolveLines()
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
	return nil
}

func (l *LimitsConfig) resolve() error {
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = 16 << 20
	}
	if l.MaxBodyBytes < 1024 {
		return errors.New("config: limits.max_body_bytes: must be at least 1024")
	}
	if err := l.KeyRate.resolve("limits.key_rate", 50, 100); err != nil {
		return err
	}
	if err := l.PricingRate.resolve("limits.pricing_rate", 5, 20); err != nil {
		return err
	}
	if l.OverloadDelay == 0 {
		l.OverloadDelay = 100 * time.Millisecond
	}
	return nil
}

// resolveRoutes requires at least one route, each named once and not
// "auto" (the Auto route is implicit), with its rate's defaults filled.
func (c *Config) resolveRoutes() error {
	if len(c.Routes) == 0 {
		return errors.New("config: routes: at least one route is required")
	}
	routes := map[string]bool{}
	for i := range c.Routes {
		rt := &c.Routes[i]
		key := fmt.Sprintf("routes[%d]", i)
		if rt.Name == "" {
			return fmt.Errorf("config: %s.name: required", key)
		}
		if rt.Name == "auto" {
			return fmt.Errorf("config: %s.name: %q is reserved for the Auto route", key, rt.Name)
		}
		if routes[rt.Name] {
			return fmt.Errorf("config: %s.name: duplicate route %q", key, rt.Name)
		}
		routes[rt.Name] = true
		if rt.Rate != nil {
			if err := rt.Rate.resolve(key+".rate", 50, 100); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolveLines checks every line against the routes (resolved before) and
// the other lines' names.
func (c *Config) resolveLines() error {
	routes := make(map[string]bool, len(c.Routes))
	for _, rt := range c.Routes {
		routes[rt.Name] = true
	}
	names := map[string]bool{}
	for i := range c.Lines {
		l := &c.Lines[i]
		if l.Name == "" {
			return fmt.Errorf("config: lines[%d].name: required", i)
		}
		key := fmt.Sprintf("lines[%d] (%s)", i, l.Name)
		if names[l.Name] {
			return fmt.Errorf("config: %s.name: duplicate line name", key)
		}
		names[l.Name] = true
		if err := l.resolve(key, routes); err != nil {
			return err
		}
	}
	return nil
}

// resolve fills one line's defaults, reads its upstream key and validates
// it; key names the line in errors, routes are the configured route names.
func (l *LineConfig) resolve(key string, routes map[string]bool) error {
	switch l.Protocol {
	case "":
		l.Protocol = ProtocolOpenAI
	case ProtocolOpenAI, ProtocolAnthropic:
	default:
		return fmt.Errorf("config: %s.protocol: %q is not openai or anthropic", key, l.Protocol)
	}
	u, err := url.Parse(l.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("config: %s.base_url: %q is not an http(s) URL", key, l.BaseURL)
	}
	l.BaseURL = strings.TrimRight(l.BaseURL, "/")
	if l.KeyEnv != "" {
		l.key = os.Getenv(l.KeyEnv)
		if l.key == "" {
			return fmt.Errorf("config: %s.key_env: environment variable %s is empty", key, l.KeyEnv)
		}
	}
	if len(l.Models) == 0 {
		return fmt.Errorf("config: %s.models: at least one model (or \"*\") is required", key)
	}
	if !routes[l.Route] {
		return fmt.Errorf("config: %s.route: %q is not a configured route", key, l.Route)
	}
	if l.Weight == 0 {
		l.Weight = 1
	}
	if l.Weight < 0 {
		return fmt.Errorf("config: %s.weight: must be positive", key)
	}
	if l.Priority < 0 {
		return fmt.Errorf("config: %s.priority: must not be negative", key)
	}
	return l.Timeouts.resolve(key)
}

func (t *Timeouts) resolve(key string) error {
	if t.Connect == 0 {
		t.Connect = 5 * time.Second
	}
	if t.FirstByte == 0 {
		t.FirstByte = 120 * time.Second
	}
	if t.Idle == 0 {
		t.Idle = 120 * time.Second
	}
	if t.Connect < 0 || t.FirstByte < 0 || t.Idle < 0 {
		return fmt.Errorf("config: %s.timeouts: must not be negative", key)
	}
	return nil
}

func (r *RetryConfig) resolve() error {
	if r.MaxTries < 0 {
		return errors.New("config: retry.max_tries: must not be negative (0: one per line of the plan, at least 3)")
	}
	if r.MaxTime == 0 {
		r.MaxTime = 30 * time.Second
	}
	if r.BackoffMin == 0 {
		r.BackoffMin = 10 * time.Millisecond
	}
	if r.BackoffMax == 0 {
		r.BackoffMax = 500 * time.Millisecond
	}
	if r.BackoffMax < r.BackoffMin {
		return errors.New("config: retry.backoff_max: must not be below retry.backoff_min")
	}
	if r.BreakerFailureRatio == 0 {
		r.BreakerFailureRatio = 0.8
	}
	if !(r.BreakerFailureRatio > 0 && r.BreakerFailureRatio <= 1) {
		return fmt.Errorf("config: retry.breaker_failure_ratio: %v is not within (0, 1]", r.BreakerFailureRatio)
	}
	if r.BreakerMinRequests == 0 {
		r.BreakerMinRequests = 20
	}
	if r.BreakerWindow == 0 {
		r.BreakerWindow = 10 * time.Second
	}
	if r.BreakerWindow < 10*time.Millisecond {
		return errors.New("config: retry.breaker_window: must be at least 10ms")
	}
	if r.BreakerOpen == 0 {
		r.BreakerOpen = 10 * time.Second
	}
	if r.BreakerOpen < 0 {
		return errors.New("config: retry.breaker_open: must not be negative")
	}
	if r.BudgetRatio == 0 {
		r.BudgetRatio = 1
	}
	if r.BudgetRatio < 0 || math.IsNaN(r.BudgetRatio) {
		return errors.New("config: retry.budget_ratio: must not be negative")
	}
	if r.BudgetMinPerSecond == 0 {
		r.BudgetMinPerSecond = 10
	}
	if math.IsNaN(r.BudgetMinPerSecond) {
		return errors.New("config: retry.budget_min_per_second: not a number")
	}
	if r.PanicShare == nil {
		share := 0.5
		r.PanicShare = &share
	}
	if !(*r.PanicShare >= 0 && *r.PanicShare <= 1) {
		return fmt.Errorf("config: retry.panic_share: %v is not within 0..1", *r.PanicShare)
	}
	if r.Max429Wait == 0 {
		r.Max429Wait = 10 * time.Second
	}
	if r.AffinityTTL == 0 {
		r.AffinityTTL = time.Hour
	}
	return nil
}

// tries is the most tries of a call whose plan has n lines.
func (r *RetryConfig) tries(n int) int {
	if r.MaxTries > 0 {
		return r.MaxTries
	}
	return max(n, 3)
}

func (r *RateConfig) resolve(key string, rate float64, burst int) error {
	if r.Rate == 0 {
		r.Rate = rate
	}
	if r.Burst == 0 {
		r.Burst = burst
	}
	if r.Rate < 0 {
		return fmt.Errorf("config: %s.rate: must be positive", key)
	}
	if r.Burst < 1 {
		return fmt.Errorf("config: %s.burst: must be at least 1", key)
	}
	return nil
}

// UpstreamKey is the line's resolved upstream credential.
func (l *LineConfig) UpstreamKey() string { return l.key }

// SetUpstreamKey sets the credential directly (the demo and tests use it).
func (l *LineConfig) SetUpstreamKey(k string) { l.key = k }

// Serves reports whether the line serves model.
func (l *LineConfig) Serves(model string) bool {
	for _, m := range l.Models {
		if m == "*" || m == model {
			return true
		}
	}
	return false
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
