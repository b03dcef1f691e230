package console

import (
	"slices"
	"strconv"

	"github.com/modelrelay/modelrelay/pricing"
)

func sortedRoutes(m pricing.Model) []string {
	out := make([]string, 0, len(m.Routes))
	for r := range m.Routes {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

func unitName(u pricing.Unit) string {
	switch u {
	case pricing.PerMillionTokens:
		return "per 1M tokens"
	case pricing.PerImage:
		return "per image"
	case pricing.PerSecond:
		return "per second of video"
	case pricing.PerRequest:
		return "per request"
	}
	return string(u)
}

// describePrice lists a price's parts as "input $3", exact.
func describePrice(p pricing.Price) []string {
	var out []string
	add := func(name string, n pricing.Nano) {
		if n != 0 {
			out = append(out, name+" $"+n.String())
		}
	}
	switch p.Unit {
	case pricing.PerMillionTokens:
		add("input", p.Input)
		add("output", p.Output)
		add("cache read", p.CacheRead)
		add("cache write", p.CacheWrite)
		add("cache write 1h", p.CacheWrite1h)
		if lc := p.LongContext; lc != nil {
			add("input above "+itoa(lc.MinInputTokens)+" tokens", lc.Input)
			add("output above "+itoa(lc.MinInputTokens)+" tokens", lc.Output)
		}
	case pricing.PerImage:
		for _, k := range sortedKeys(p.Sizes) {
			add(k, p.Sizes[k])
		}
	case pricing.PerSecond:
		for _, k := range sortedKeys(p.Resolutions) {
			add(k, p.Resolutions[k])
		}
	case pricing.PerRequest:
		add("each", p.UnitPrice)
	}
	return out
}

func sortedKeys(m map[string]pricing.Nano) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
