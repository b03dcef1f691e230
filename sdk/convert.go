package sdk

import (
	"sort"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// modelToABI converts a catalogue entry to its wire form, for Describe.
// Routes come sorted by route name; size and resolution tiers by price, then
// name.
func modelToABI(m pricing.Model) abi.Model {
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
		out.Routes = append(out.Routes, abi.RoutePrice{Route: name, Price: priceToABI(m.Routes[name])})
	}
	if m.Reference != nil {
		out.HasReference = true
		out.Reference = priceToABI(*m.Reference)
	}
	if s := m.ReferenceSource; s != nil {
		out.HasSource = true
		out.ReferenceSource = abi.Source{Kind: s.Kind, Name: s.Name, URL: s.URL, VerifiedAt: s.VerifiedAt, Model: s.Model}
	}
	return out
}

// priceToABI converts a route price to its wire form.
func priceToABI(p pricing.Price) abi.Price {
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

// usageFromABI converts a wire usage to a pricing.Usage. The two types
// have the same fields in the same order (only their JSON tags differ), so
// this is a conversion: a field added to one and not the other stops the
// build here rather than dropping a count on the way.
func usageFromABI(u abi.Usage) pricing.Usage { return pricing.Usage(u) }
