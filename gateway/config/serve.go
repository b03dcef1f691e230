package config

import (
	"fmt"
	"slices"
)

// ServeConfig widens the endpoints text models answer on: on Route (every
// route when empty), each of Models ("*": every text model) also answers
// on Endpoints, whatever its catalogue lists. A call on an endpoint the
// line that serves it does not speak is translated (package wire/xlate),
// and priced as the catalogue prices the model on its route.
type ServeConfig struct {
	Models    []string `yaml:"models"`
	Route     string   `yaml:"route"`
	Endpoints []string `yaml:"endpoints"`
}

// TextEndpoints are the endpoint types translation serves, and so the
// only ones serve may widen.
var TextEndpoints = []string{"chat_completions", "responses", "messages"}

// resolveServe checks each serve entry: models named, endpoints among
// TextEndpoints, the route configured.
func (c *Config) resolveServe(routes map[string]bool) error {
	for i, s := range c.Serve {
		key := fmt.Sprintf("serve[%d]", i)
		if len(s.Models) == 0 {
			return fmt.Errorf("config: %s.models: required (model ids, or \"*\" for every text model)", key)
		}
		if len(s.Endpoints) == 0 {
			return fmt.Errorf("config: %s.endpoints: required (some of %v)", key, TextEndpoints)
		}
		for j, e := range s.Endpoints {
			if !slices.Contains(TextEndpoints, e) {
				return fmt.Errorf("config: %s.endpoints[%d]: %q is not one of %v", key, j, e, TextEndpoints)
			}
		}
		if s.Route != "" && !routes[s.Route] {
			return fmt.Errorf("config: %s.route: %q is not a configured route", key, s.Route)
		}
	}
	return nil
}

// Widens reports whether a serve entry makes model (a text model) answer
// on endpoint on route.
func (c *Config) Widens(model, route, endpoint string) bool {
	for _, s := range c.Serve {
		if (s.Route == "" || s.Route == route) && slices.Contains(s.Endpoints, endpoint) &&
			(slices.Contains(s.Models, "*") || slices.Contains(s.Models, model)) {
			return true
		}
	}
	return false
}
