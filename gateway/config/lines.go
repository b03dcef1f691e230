package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// RouteConfig is a named route. Its prices come from the plugins.
type RouteConfig struct {
	Name string `yaml:"name"`
	// Rate overrides the key rate limit for keys on this route.
	Rate *RateConfig `yaml:"rate"`
}

// LineConfig is one upstream connection.
type LineConfig struct {
	Name string `yaml:"name"`
	// Protocol is what the upstream speaks: "openai" (chat, responses,
	// images, videos, typed questions), "openai-chat" (chat completions
	// only: the OpenAI-compatible servers), "anthropic" (messages) or
	// "gemini" (generateContent, key in x-goog-api-key). A text call whose
	// endpoint the line does not speak is translated (package wire/xlate).
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
	ProtocolOpenAI     = "openai"
	ProtocolOpenAIChat = "openai-chat"
	ProtocolAnthropic  = "anthropic"
	ProtocolGemini     = "gemini"
)

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
	case ProtocolOpenAI, ProtocolOpenAIChat, ProtocolAnthropic, ProtocolGemini:
	default:
		return fmt.Errorf("config: %s.protocol: %q is not openai, openai-chat, anthropic or gemini", key, l.Protocol)
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

// UpstreamKey is the line's resolved upstream credential.
func (l *LineConfig) UpstreamKey() string { return l.key }

// SetUpstreamKey sets the credential directly (the demo and tests use it).
func (l *LineConfig) SetUpstreamKey(k string) { l.key = k }

// Serves reports whether the line serves model.
func (l *LineConfig) Serves(model string) bool {
	return l.ServesModel(model, nil)
}

// ServesModel is Serves for a model whose catalogue endpoints are
// endpoints (nil: unknown, any): a line with "*" serves only the models
// its protocol can answer — an anthropic line those served by messages,
// an openai-chat or gemini line the text models, an openai line any —
// so that translation never sends a model to a line of another protocol
// only because it serves "*". A model the line names is always served.
func (l *LineConfig) ServesModel(model string, endpoints []string) bool {
	if slices.Contains(l.Models, model) {
		return true
	}
	return slices.Contains(l.Models, "*") && (endpoints == nil || wildcardServes(l.Protocol, endpoints))
}

func wildcardServes(protocol string, endpoints []string) bool {
	switch protocol {
	case ProtocolAnthropic:
		return slices.Contains(endpoints, "messages")
	case ProtocolOpenAIChat, ProtocolGemini:
		for _, e := range TextEndpoints {
			if slices.Contains(endpoints, e) {
				return true
			}
		}
		return false
	default:
		return true
	}
}
