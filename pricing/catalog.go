package pricing

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// fieldError is an error at a path of fields ("routes.standard.cache_write").
// Wrapping one in another (at) prefixes the path, so the message names the
// place from the outermost object down.
type fieldError struct {
	path string
	err  error
}

func (e *fieldError) Error() string { return e.path + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// at puts err under the field name; nil stays nil.
func at(name string, err error) error {
	if err == nil {
		return nil
	}
	if fe, ok := err.(*fieldError); ok {
		if strings.HasPrefix(fe.path, "[") {
			return &fieldError{path: name + fe.path, err: fe.err}
		}
		return &fieldError{path: name + "." + fe.path, err: fe.err}
	}
	return &fieldError{path: name, err: err}
}

var (
	errRequired = errors.New("required")
)

// knownEndpoints are the Endpoint constants.
var knownEndpoints = map[string]bool{
	EndpointChat: true, EndpointResponses: true, EndpointMessages: true,
	EndpointImages: true, EndpointImageEdit: true, EndpointVideo: true,
	EndpointSystemOne: true,
}

// ParseModels parses a plugin's price-list configuration:
//
//	{"models": [{
//	  "id": "modela-opus-5-5", "description": "…", "notice": "",
//	  "endpoints": ["chat_completions", "messages"],
//	  "context_window": 200000, "max_output": 64000, "auto_route": "standard",
//	  "routes": {
//	    "standard": {"unit": "per_million_tokens", "input": "15", "output": "75",
//	      "cache_read": "1.5", "cache_write": "18.75", "cache_write_1h": "30",
//	      "long_context": {"min_input_tokens": 200000, "input": "30", "output": "112.5"}},
//	    "economy": {"unit": "per_image", "sizes": {"1K": "0.03", "2K": "0.05"}}},
//	  "reference_price": {…a route price…},
//	  "reference_price_source": {"kind": "list_price", "name": "…", "url": "…",
//	    "verified_at": "2026-09-19", "model": "…"}}]}
//
// Prices are US dollars, as JSON strings or JSON numbers; either way they are
// parsed from their exact text with ParseUSD, never through a float. Token
// prices are per one million tokens. Unknown keys, duplicate keys, unknown
// units and endpoints, and keys a unit does not use are errors. A route price
// of unit per_million_tokens requires input and output (absent cache prices
// are 0); per_image requires sizes, per_second resolutions, per_request
// unit_price; a long_context requires all three of its fields, with
// min_input_tokens above 0. Every model needs a unique id, at least one
// endpoint and at least one route; auto_route, when set, must name one of its
// routes.
//
// An error names the place:
//
//	models[3] (modela-opus-5-5): routes.standard.cache_write: "1.2345678901" has more precision than one nano-USD
func ParseModels(data []byte) ([]Model, error) {
	if !json.Valid(data) {
		return nil, fmt.Errorf("price list: %w", syntaxError(data))
	}
	top, err := decodeObject(data)
	if err != nil {
		return nil, fmt.Errorf("price list: %w", err)
	}
	var list []json.RawMessage
	seenModels := false
	for _, m := range top {
		switch m.key {
		case "models":
			seenModels = true
			if list, err = decodeArray(m.value); err != nil {
				return nil, at("models", err)
			}
		default:
			return nil, at(m.key, errors.New("unknown key"))
		}
	}
	if !seenModels {
		return nil, at("models", errRequired)
	}
	if len(list) == 0 {
		return nil, at("models", errors.New("no models"))
	}
	models := make([]Model, 0, len(list))
	index := make(map[string]int, len(list))
	for i, raw := range list {
		m, err := parseModel(raw)
		if err == nil {
			if j, dup := index[m.ID]; dup {
				err = at("id", fmt.Errorf("%q is also the id of models[%d]", m.ID, j))
			}
		}
		if err != nil {
			if m.ID != "" {
				return nil, fmt.Errorf("models[%d] (%s): %w", i, m.ID, err)
			}
			return nil, fmt.Errorf("models[%d]: %w", i, err)
		}
		index[m.ID] = i
		models = append(models, m)
	}
	return models, nil
}

// syntaxError describes why data is not JSON, by offset only: it never quotes
// the input.
func syntaxError(data []byte) error {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("not valid JSON (at byte %d)", se.Offset)
	}
	return errors.New("not valid JSON")
}

// parseModel parses one model object. On error the returned Model still
// carries the id when one was read, for the error's prefix.
func parseModel(raw json.RawMessage) (Model, error) {
	var m Model
	members, err := decodeObject(raw)
	for _, f := range members { // the id first, so that every error can name the model
		if f.key == "id" {
			id, idErr := decodeString(f.value)
			if idErr != nil {
				return m, at("id", idErr)
			}
			m.ID = id
		}
	}
	if err != nil {
		return m, err
	}
	seen := map[string]bool{}
	for _, f := range members {
		seen[f.key] = true
		var err error
		switch f.key {
		case "id":
		case "description":
			m.Description, err = decodeString(f.value)
		case "notice":
			m.Notice, err = decodeString(f.value)
		case "endpoints":
			m.Endpoints, err = decodeStrings(f.value)
		case "context_window":
			m.ContextWindow, err = decodeCount(f.value)
		case "max_output":
			m.MaxOutput, err = decodeCount(f.value)
		case "auto_route":
			m.AutoRoute, err = decodeString(f.value)
		case "routes":
			m.Routes, err = parseRoutes(f.value)
		case "reference_price":
			var p Price
			p, err = parsePrice(f.value)
			m.Reference = &p
		case "reference_price_source":
			m.ReferenceSource, err = parseSource(f.value)
		default:
			err = errors.New("unknown key")
		}
		if err != nil {
			return m, at(f.key, err)
		}
	}
	for _, k := range [...]string{"id", "endpoints", "routes"} {
		if !seen[k] {
			return m, at(k, errRequired)
		}
	}
	return m, m.Validate()
}

func parseRoutes(raw json.RawMessage) (map[string]Price, error) {
	members, err := decodeObject(raw)
	if err != nil {
		return nil, err
	}
	routes := make(map[string]Price, len(members))
	for _, f := range members {
		p, err := parsePrice(f.value)
		if err != nil {
			return nil, at(f.key, err)
		}
		routes[f.key] = p
	}
	return routes, nil
}

func parseSource(raw json.RawMessage) (*Source, error) {
	members, err := decodeObject(raw)
	if err != nil {
		return nil, err
	}
	var s Source
	for _, f := range members {
		var dst *string
		switch f.key {
		case "kind":
			dst = &s.Kind
		case "name":
			dst = &s.Name
		case "url":
			dst = &s.URL
		case "verified_at":
			dst = &s.VerifiedAt
		case "model":
			dst = &s.Model
		default:
			return nil, at(f.key, errors.New("unknown key"))
		}
		if *dst, err = decodeString(f.value); err != nil {
			return nil, at(f.key, err)
		}
	}
	return &s, nil
}

// unitKeys lists the keys of a route price each unit uses besides "unit".
var unitKeys = map[Unit][]string{
	PerMillionTokens: {"input", "output", "cache_read", "cache_write", "cache_write_1h", "long_context"},
	PerImage:         {"sizes"},
	PerSecond:        {"resolutions"},
	PerRequest:       {"unit_price"},
}

// requiredKeys lists the keys each unit requires.
var requiredKeys = map[Unit][]string{
	PerMillionTokens: {"input", "output"},
	PerImage:         {"sizes"},
	PerSecond:        {"resolutions"},
	PerRequest:       {"unit_price"},
}

// parsePrice parses one route price object (docs/api.md#prices).
func parsePrice(raw json.RawMessage) (Price, error) {
	var p Price
	members, err := decodeObject(raw)
	if err != nil {
		return p, err
	}
	seen := map[string]bool{}
	for _, f := range members {
		if f.key == "unit" {
			s, err := decodeString(f.value)
			if err != nil {
				return p, at("unit", err)
			}
			p.Unit = Unit(s)
			if _, ok := unitKeys[p.Unit]; !ok {
				return p, at("unit", unknownUnit(p.Unit))
			}
		}
	}
	if p.Unit == "" {
		return p, at("unit", errRequired)
	}
	for _, f := range members {
		seen[f.key] = true
		var err error
		switch f.key {
		case "unit":
			continue
		case "input", "output", "cache_read", "cache_write", "cache_write_1h", "long_context",
			"sizes", "resolutions", "unit_price":
			if !contains(unitKeys[p.Unit], f.key) {
				return p, at(f.key, fmt.Errorf("not used by unit %s", p.Unit))
			}
		default:
			return p, at(f.key, errors.New("unknown key"))
		}
		switch f.key {
		case "input":
			p.Input, err = decodePrice(f.value)
		case "output":
			p.Output, err = decodePrice(f.value)
		case "cache_read":
			p.CacheRead, err = decodePrice(f.value)
		case "cache_write":
			p.CacheWrite, err = decodePrice(f.value)
		case "cache_write_1h":
			p.CacheWrite1h, err = decodePrice(f.value)
		case "long_context":
			p.LongContext, err = parseLongContext(f.value)
		case "sizes":
			p.Sizes, err = decodePriceMap(f.value)
		case "resolutions":
			p.Resolutions, err = decodePriceMap(f.value)
		case "unit_price":
			p.UnitPrice, err = decodePrice(f.value)
		}
		if err != nil {
			return p, at(f.key, err)
		}
	}
	for _, k := range requiredKeys[p.Unit] {
		if !seen[k] {
			return p, at(k, fmt.Errorf("required by unit %s", p.Unit))
		}
	}
	return p, p.Validate()
}

func parseLongContext(raw json.RawMessage) (*LongContext, error) {
	members, err := decodeObject(raw)
	if err != nil {
		return nil, err
	}
	var lc LongContext
	seen := map[string]bool{}
	for _, f := range members {
		seen[f.key] = true
		switch f.key {
		case "min_input_tokens":
			lc.MinInputTokens, err = decodeCount(f.value)
		case "input":
			lc.Input, err = decodePrice(f.value)
		case "output":
			lc.Output, err = decodePrice(f.value)
		default:
			err = errors.New("unknown key")
		}
		if err != nil {
			return nil, at(f.key, err)
		}
	}
	for _, k := range [...]string{"min_input_tokens", "input", "output"} {
		if !seen[k] {
			return nil, at(k, errRequired)
		}
	}
	return &lc, nil
}

func unknownUnit(u Unit) error {
	return fmt.Errorf("%q is not one of %s, %s, %s, %s", string(u), PerMillionTokens, PerImage, PerSecond, PerRequest)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Validate checks a Price built in code (or received from a plugin) by the
// rules ParseModels applies to values: a known unit, no negative price, the
// fields the unit needs present (sizes for per_image, resolutions for
// per_second), no non-zero field the unit does not use, and a long_context
// (per_million_tokens only) with min_input_tokens above 0. The error names
// the field.
func (p Price) Validate() error {
	if _, ok := unitKeys[p.Unit]; !ok {
		return at("unit", unknownUnit(p.Unit))
	}
	prices := [...]struct {
		name string
		v    Nano
	}{
		{"input", p.Input}, {"output", p.Output}, {"cache_read", p.CacheRead},
		{"cache_write", p.CacheWrite}, {"cache_write_1h", p.CacheWrite1h}, {"unit_price", p.UnitPrice},
	}
	for _, f := range prices {
		if f.v < 0 {
			return at(f.name, errors.New("negative"))
		}
		if f.v != 0 && !contains(unitKeys[p.Unit], f.name) {
			return at(f.name, fmt.Errorf("not used by unit %s", p.Unit))
		}
	}
	if lc := p.LongContext; lc != nil {
		if p.Unit != PerMillionTokens {
			return at("long_context", fmt.Errorf("not used by unit %s", p.Unit))
		}
		switch {
		case lc.MinInputTokens <= 0:
			return at("long_context.min_input_tokens", errors.New("must be above 0"))
		case lc.Input < 0:
			return at("long_context.input", errors.New("negative"))
		case lc.Output < 0:
			return at("long_context.output", errors.New("negative"))
		}
	}
	for _, t := range [...]struct {
		name string
		m    map[string]Nano
		unit Unit
	}{{"sizes", p.Sizes, PerImage}, {"resolutions", p.Resolutions, PerSecond}} {
		if p.Unit == t.unit && len(t.m) == 0 {
			return at(t.name, fmt.Errorf("required by unit %s", p.Unit))
		}
		if p.Unit != t.unit && len(t.m) != 0 {
			return at(t.name, fmt.Errorf("not used by unit %s", p.Unit))
		}
		for _, k := range sortedKeys(t.m) {
			if k == "" {
				return at(t.name, errors.New("empty name"))
			}
			if t.m[k] < 0 {
				return at(t.name+"."+k, errors.New("negative"))
			}
		}
	}
	return nil
}

// Validate checks a Model built in code (or received from a plugin) by the
// rules ParseModels applies: an id without spaces or control characters, at
// least one endpoint, each a known Endpoint constant and listed once, at least
// one route, each with a non-empty name and a valid Price, an auto_route that
// names one of the routes, non-negative context_window and max_output, and a
// valid reference price. The error names the field.
func (m Model) Validate() error {
	if m.ID == "" {
		return at("id", errRequired)
	}
	for _, r := range m.ID {
		if r <= ' ' || r == 0x7f {
			return at("id", fmt.Errorf("%q contains a space or control character", m.ID))
		}
	}
	if len(m.Endpoints) == 0 {
		return at("endpoints", errors.New("no endpoints"))
	}
	for i, e := range m.Endpoints {
		if !knownEndpoints[e] {
			return at(fmt.Sprintf("endpoints[%d]", i), fmt.Errorf("%q is not a known endpoint (%s)", e, strings.Join(sortedKeys(knownEndpoints), ", ")))
		}
		for _, prev := range m.Endpoints[:i] {
			if prev == e {
				return at(fmt.Sprintf("endpoints[%d]", i), fmt.Errorf("%q is listed twice", e))
			}
		}
	}
	if m.ContextWindow < 0 {
		return at("context_window", errors.New("negative"))
	}
	if m.MaxOutput < 0 {
		return at("max_output", errors.New("negative"))
	}
	if len(m.Routes) == 0 {
		return at("routes", errors.New("no routes"))
	}
	for _, name := range sortedKeys(m.Routes) {
		if name == "" {
			return at("routes", errors.New("empty route name"))
		}
		if err := m.Routes[name].Validate(); err != nil {
			return at("routes", at(name, err))
		}
	}
	if m.AutoRoute != "" {
		if _, ok := m.Routes[m.AutoRoute]; !ok {
			return at("auto_route", fmt.Errorf("%q is not one of the routes (%s)", m.AutoRoute, strings.Join(sortedKeys(m.Routes), ", ")))
		}
	}
	if m.Reference != nil {
		if err := m.Reference.Validate(); err != nil {
			return at("reference_price", err)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
