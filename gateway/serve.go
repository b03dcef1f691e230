package gateway

import (
	"slices"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// Which endpoints a model answers on is its catalogue's decision (its
// plugin's), widened by the configuration's serve entries for text
// models: such a call is translated for its line when the line speaks
// another protocol (translate.go).

// keyRoute is the route a call of key to m goes on: the key's, or m's
// Auto route for an Auto key.
func keyRoute(k store.Key, m pricing.Model) string {
	if k.Route == store.AutoRoute {
		return m.EffectiveAutoRoute()
	}
	return k.Route
}

// serves reports whether m answers on ep on route.
func (rl *relay) serves(m pricing.Model, route string, ep *endpoint) bool {
	if slices.Contains(m.Endpoints, ep.name) {
		return true
	}
	return ep.shape != "" && textModel(m) && rl.cfg.Widens(m.ID, route, ep.name)
}

// textModel reports whether m is served by a text endpoint.
func textModel(m pricing.Model) bool {
	for _, e := range config.TextEndpoints {
		if slices.Contains(m.Endpoints, e) {
			return true
		}
	}
	return false
}

// servedEndpoints is m's catalogue endpoints and those the serve entries
// add on route, or on any of m's routes when route is "".
func servedEndpoints(cfg *config.Config, m pricing.Model, route string) []string {
	out := slices.Clone(m.Endpoints)
	if !textModel(m) {
		return out
	}
	for _, e := range config.TextEndpoints {
		if slices.Contains(out, e) {
			continue
		}
		widened := false
		if route != "" {
			widened = cfg.Widens(m.ID, route, e)
		} else {
			for r := range m.Routes {
				widened = widened || cfg.Widens(m.ID, r, e)
			}
		}
		if widened {
			out = append(out, e)
		}
	}
	return out
}

// priceEndpoint is the endpoint a call on endpoint is quoted for: the
// endpoint itself, or for a widened one the model's first text endpoint,
// as its plugin prices the model the same on each.
func priceEndpoint(m pricing.Model, endpoint string) string {
	if slices.Contains(m.Endpoints, endpoint) {
		return endpoint
	}
	for _, e := range m.Endpoints {
		if slices.Contains(config.TextEndpoints, e) {
			return e
		}
	}
	return endpoint
}
