package pricing

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MarshalTable writes the public price table (docs/api.md#prices),
//
//	{"success":true,"data":[price model, …]}
//
// with one price model per entry of models, sorted by model_name. A price
// model carries model_name, description and notice; enable_groups, the names
// of its routes, sorted; supported_endpoint_types, its Endpoints in the
// order given; route_prices, each route's Price (Price.MarshalJSON, routes
// sorted by name); reference_price and reference_price_source when the model
// has them (left out otherwise); auto_route (EffectiveAutoRoute); and
// context_window and max_output, left out when 0. Every amount is written
// exactly from its integer, in US dollars (Nano.String): a JSON number that
// ParseUSD reads back to the same Nano.
//
// models is not modified. A model that fails Model.Validate, or two models
// with one id, make it fail with an error naming the model.
func MarshalTable(models []Model) ([]byte, error) {
	sorted := slices.Clone(models)
	slices.SortFunc(sorted, func(a, b Model) int { return strings.Compare(a.ID, b.ID) })
	for i, m := range sorted {
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("price table: model %q: %w", m.ID, err)
		}
		if i > 0 && sorted[i-1].ID == m.ID {
			return nil, fmt.Errorf("price table: model %q is listed twice", m.ID)
		}
	}
	b := make([]byte, 0, 64+len(sorted)*1024)
	b = append(b, `{"success":true,"data":[`...)
	for i, m := range sorted {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendPriceModel(b, m); err != nil {
			return nil, fmt.Errorf("price table: model %q: %w", m.ID, err)
		}
	}
	return append(b, "]}"...), nil
}

// EffectiveAutoRoute is the route a key on the Auto route is charged on for
// m: AutoRoute when set, otherwise the first of m's route names in byte order
// ("" when m has no routes).
func (m Model) EffectiveAutoRoute() string {
	if m.AutoRoute != "" {
		return m.AutoRoute
	}
	route := ""
	for name := range m.Routes {
		if route == "" || name < route {
			route = name
		}
	}
	return route
}

// appendPriceModel appends one price model (docs/api.md#prices) object.
func appendPriceModel(b []byte, m Model) ([]byte, error) {
	b = append(b, `{"model_name":`...)
	b = appendJSONString(b, m.ID)
	b = append(b, `,"description":`...)
	b = appendJSONString(b, m.Description)
	b = append(b, `,"notice":`...)
	b = appendJSONString(b, m.Notice)

	routes := sortedKeys(m.Routes)
	b = append(b, `,"enable_groups":`...)
	b = appendStrings(b, routes)
	b = append(b, `,"supported_endpoint_types":`...)
	b = appendStrings(b, m.Endpoints)

	b = append(b, `,"route_prices":{`...)
	for i, name := range routes {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, name)
		b = append(b, ':')
		p, err := m.Routes[name].MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("route_prices.%s: %w", name, err)
		}
		b = append(b, p...)
	}
	b = append(b, '}')

	if m.Reference != nil {
		p, err := m.Reference.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("reference_price: %w", err)
		}
		b = append(b, `,"reference_price":`...)
		b = append(b, p...)
	}
	if s := m.ReferenceSource; s != nil {
		b = append(b, `,"reference_price_source":{"kind":`...)
		b = appendJSONString(b, s.Kind)
		b = append(b, `,"name":`...)
		b = appendJSONString(b, s.Name)
		b = append(b, `,"url":`...)
		b = appendJSONString(b, s.URL)
		b = append(b, `,"verified_at":`...)
		b = appendJSONString(b, s.VerifiedAt)
		b = append(b, `,"model":`...)
		b = appendJSONString(b, s.Model)
		b = append(b, '}')
	}
	b = append(b, `,"auto_route":`...)
	b = appendJSONString(b, m.EffectiveAutoRoute())
	if m.ContextWindow != 0 {
		b = append(b, `,"context_window":`...)
		b = strconv.AppendInt(b, m.ContextWindow, 10)
	}
	if m.MaxOutput != 0 {
		b = append(b, `,"max_output":`...)
		b = strconv.AppendInt(b, m.MaxOutput, 10)
	}
	return append(b, '}'), nil
}

// appendStrings appends a JSON array of strings; nil is written as [].
func appendStrings(b []byte, list []string) []byte {
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}
