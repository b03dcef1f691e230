package plugins

import (
	"fmt"
	"slices"
	"sync"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

// maxPlans bounds a plan cache. Keys are (model, route, lines), so the
// number of live keys is about models × routes × breaker-state combinations
// seen recently; when the bound is reached the cache starts over.
const maxPlans = 4096

// planCache holds the line plans of one version of the select plugin. A plan
// depends on the model, the route and the lines with their breaker states
// (abi.Step: the host randomises within a tier per request), not on the
// time, so the key is the encoding of the SelectRequest with Now zeroed: an
// exact key, no hash collisions. It belongs to the version, so a reloaded
// select plugin starts with an empty cache.
type planCache struct {
	mu    sync.RWMutex
	plans map[string][]abi.Step
}

func newPlanCache() *planCache {
	return &planCache{plans: make(map[string][]abi.Step)}
}

// keyBuf recycles the buffers keys are encoded into.
var keyBuf = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// planKey appends the cache key of req to b.
func planKey(b []byte, req *abi.SelectRequest) []byte {
	now := req.Now
	req.Now = 0
	b = req.AppendTo(b)
	req.Now = now
	return b
}

// get returns a copy of the cached plan for key (the caller may reorder it).
func (c *planCache) get(key []byte) ([]abi.Step, bool) {
	c.mu.RLock()
	plan, ok := c.plans[string(key)]
	c.mu.RUnlock()
	if !ok {
		return nil, false
	}
	return slices.Clone(plan), true
}

func (c *planCache) put(key []byte, plan []abi.Step) {
	c.mu.Lock()
	if len(c.plans) >= maxPlans {
		clear(c.plans)
	}
	c.plans[string(key)] = slices.Clone(plan)
	c.mu.Unlock()
}

// checkPlan enforces what the ABI promises about a plan: every step names a
// line of the request that is not open, no line twice, tiers in order and
// weights not negative. A plan that breaks it is a malformed result.
func checkPlan(req *abi.SelectRequest, plan []abi.Step) error {
	for i, s := range plan {
		j := slices.IndexFunc(req.Lines, func(l abi.Line) bool { return l.Name == s.Line })
		switch {
		case j < 0:
			return fmt.Errorf("plan[%d]: line %q is not one of the request's lines", i, s.Line)
		case req.Lines[j].Open:
			return fmt.Errorf("plan[%d]: line %q has an open breaker", i, s.Line)
		case s.Weight < 0:
			return fmt.Errorf("plan[%d]: negative weight %d", i, s.Weight)
		case i > 0 && s.Tier < plan[i-1].Tier:
			return fmt.Errorf("plan[%d]: tier %d after tier %d", i, s.Tier, plan[i-1].Tier)
		}
		for _, prev := range plan[:i] {
			if prev.Line == s.Line {
				return fmt.Errorf("plan[%d]: line %q is planned twice", i, s.Line)
			}
		}
	}
	return nil
}
