package sdk

import (
	"sort"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// ModelToABI converts a catalogue entry to its wire form. Routes come sorted
// by route name; size and resolution tiers by price, then name.
func ModelToABI(m pricing.Model) abi.Model {
	out := abi.Model{
		ID:            m.ID,
		Description:   m.Description,
		Notice:        m.Notice,
		Endpoints:     append([]string(nil), m.Endpoints...),
		ContextWindow: m.ContextWindow,
		MaxOutput:     m.MaxOutput,
		AutoRoute:     m.AutoRoute,
	}
	names := make([]string, 0, len(m.Routes))
	for name := range m.Routes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		out.Routes = append(out.Routes, abi.RoutePrice{Route: name, Price: PriceToABI(m.Routes[name])})
	}
	if m.Reference != nil {
		out.HasReference = true
		out.Reference = PriceToABI(*m.Reference)
	}
	if s := m.ReferenceSource; s != nil {
		out.HasSource = true
		out.ReferenceSource = abi.Source{Kind: s.Kind, Name: s.Name, URL: s.URL, VerifiedAt: s.VerifiedAt, Model: s.Model}
	}
	return out
}

// ModelFromABI converts a wire model back to a catalogue entry. A route or
// tier named twice keeps its last price.
func ModelFromABI(m abi.Model) pricing.Model {
	out := pricing.Model{
		ID:            m.ID,
		Description:   m.Description,
		Notice:        m.Notice,
		Endpoints:     append([]string(nil), m.Endpoints...),
		ContextWindow: m.ContextWindow,
		MaxOutput:     m.MaxOutput,
		AutoRoute:     m.AutoRoute,
		Routes:        make(map[string]pricing.Price, len(m.Routes)),
	}
	for _, r := range m.Routes {
		out.Routes[r.Route] = PriceFromABI(r.Price)
	}
	if m.HasReference {
		p := PriceFromABI(m.Reference)
		out.Reference = &p
	}
	if m.HasSource {
		s := m.ReferenceSource
		out.ReferenceSource = &pricing.Source{Kind: s.Kind, Name: s.Name, URL: s.URL, VerifiedAt: s.VerifiedAt, Model: s.Model}
	}
	return out
}

// PriceToABI converts a route price to its wire form.
func PriceToABI(p pricing.Price) abi.Price {
	out := abi.Price{
		Unit:         string(p.Unit),
		Input:        int64(p.Input),
		Output:       int64(p.Output),
		CacheRead:    int64(p.CacheRead),
		CacheWrite:   int64(p.CacheWrite),
		CacheWrite1h: int64(p.CacheWrite1h),
		Sizes:        tiersToABI(p.Sizes),
		Resolutions:  tiersToABI(p.Resolutions),
		UnitPrice:    int64(p.UnitPrice),
	}
	if lc := p.LongContext; lc != nil {
		out.HasLongContext = true
		out.LongContextMin = lc.MinInputTokens
		out.LongContextInput = int64(lc.Input)
		out.LongContextOutput = int64(lc.Output)
	}
	return out
}

// PriceFromABI converts a wire price back to a route price.
func PriceFromABI(p abi.Price) pricing.Price {
	out := pricing.Price{
		Unit:         pricing.Unit(p.Unit),
		Input:        pricing.Nano(p.Input),
		Output:       pricing.Nano(p.Output),
		CacheRead:    pricing.Nano(p.CacheRead),
		CacheWrite:   pricing.Nano(p.CacheWrite),
		CacheWrite1h: pricing.Nano(p.CacheWrite1h),
		Sizes:        tiersFromABI(p.Sizes),
		Resolutions:  tiersFromABI(p.Resolutions),
		UnitPrice:    pricing.Nano(p.UnitPrice),
	}
	if p.HasLongContext {
		out.LongContext = &pricing.LongContext{
			MinInputTokens: p.LongContextMin,
			Input:          pricing.Nano(p.LongContextInput),
			Output:         pricing.Nano(p.LongContextOutput),
		}
	}
	return out
}

func tiersToABI(m map[string]pricing.Nano) []abi.Tier {
	if len(m) == 0 {
		return nil
	}
	out := make([]abi.Tier, 0, len(m))
	for name, price := range m {
		out = append(out, abi.Tier{Name: name, Price: int64(price)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Price != out[j].Price {
			return out[i].Price < out[j].Price
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func tiersFromABI(list []abi.Tier) map[string]pricing.Nano {
	if len(list) == 0 {
		return nil
	}
	out := make(map[string]pricing.Nano, len(list))
	for _, t := range list {
		out[t.Name] = pricing.Nano(t.Price)
	}
	return out
}

// UsageToABI converts a usage to its wire form. pricing.Usage and
// abi.Usage have the same fields in the same order (only their JSON tags
// differ), so this is a conversion: a field added to one and not the other
// stops the build here rather than dropping a count on the way.
func UsageToABI(u pricing.Usage) abi.Usage { return abi.Usage(u) }

// UsageFromABI converts a wire usage to a pricing.Usage (see UsageToABI).
func UsageFromABI(u abi.Usage) pricing.Usage { return pricing.Usage(u) }
