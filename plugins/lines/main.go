package main

import (
	"slices"

	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

func init() {
	sdk.Register(sdk.Plugin{Name: "lines", Select: plan})
}

func main() {}

// plan selects the lines on req.Route that list req.Model (or "*", every
// model of the route) and are not open,
// ordered by priority (stably: lines of one priority keep the host's order),
// and numbers the distinct priorities as tiers 0, 1, 2, … A negative weight
// is a host configuration error.
func plan(req abi.SelectRequest) (abi.SelectResult, error) {
	var usable []abi.Line
	for _, l := range req.Lines {
		if l.Open || l.Route != req.Route || !(slices.Contains(l.Models, req.Model) || slices.Contains(l.Models, "*")) {
			continue
		}
		if l.Weight < 0 {
			return abi.SelectResult{}, sdk.Internal("line %s has a negative weight (%d)", l.Name, l.Weight)
		}
		usable = append(usable, l)
	}
	slices.SortStableFunc(usable, func(a, b abi.Line) int {
		switch {
		case a.Priority < b.Priority:
			return -1
		case a.Priority > b.Priority:
			return 1
		}
		return 0
	})
	steps := make([]abi.Step, len(usable))
	var tier int64
	for i, l := range usable {
		if i > 0 && l.Priority != usable[i-1].Priority {
			tier++
		}
		steps[i] = abi.Step{Line: l.Name, Tier: tier, Weight: l.Weight}
	}
	return abi.SelectResult{Plan: steps}, nil
}
