package plugins

import (
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

func TestCheckPlan(t *testing.T) {
	t.Parallel()
	req := &abi.SelectRequest{Model: "m", Route: "standard", Lines: []abi.Line{
		{Name: "a", Weight: 1}, {Name: "b", Weight: 1}, {Name: "c", Open: true},
	}}
	cases := []struct {
		name    string
		plan    []abi.Step
		wantErr string
	}{
		{name: "empty plan", plan: nil},
		{name: "two tiers", plan: []abi.Step{{Line: "a", Tier: 0, Weight: 1}, {Line: "b", Tier: 1, Weight: 1}}},
		{name: "unknown line", plan: []abi.Step{{Line: "x"}}, wantErr: `plan[0]: line "x" is not one of the request's lines`},
		{name: "open line", plan: []abi.Step{{Line: "a"}, {Line: "c", Tier: 1}}, wantErr: `plan[1]: line "c" has an open breaker`},
		{name: "negative weight", plan: []abi.Step{{Line: "a", Weight: -1}}, wantErr: "negative weight"},
		{name: "tiers out of order", plan: []abi.Step{{Line: "a", Tier: 2}, {Line: "b", Tier: 1}}, wantErr: "plan[1]: tier 1 after tier 2"},
		{name: "line twice", plan: []abi.Step{{Line: "a"}, {Line: "a", Tier: 1}}, wantErr: `plan[1]: line "a" is planned twice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkPlan(req, tc.plan)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestPlanKey(t *testing.T) {
	t.Parallel()
	base := abi.SelectRequest{Now: 1, Model: "m", Route: "standard", Lines: []abi.Line{{Name: "a", Models: []string{"m"}, Weight: 1}}}
	key := func(r abi.SelectRequest) string { return string(planKey(nil, &r)) }
	later := base
	later.Now = 99
	if key(base) != key(later) {
		t.Error("the key depends on Now")
	}
	if base.Now != 1 {
		t.Error("planKey changed the request")
	}
	variants := map[string]func(*abi.SelectRequest){
		"model": func(r *abi.SelectRequest) { r.Model = "n" },
		"route": func(r *abi.SelectRequest) { r.Route = "economy" },
		"open": func(r *abi.SelectRequest) {
			r.Lines = []abi.Line{{Name: "a", Models: []string{"m"}, Weight: 1, Open: true}}
		},
		"weight": func(r *abi.SelectRequest) { r.Lines = []abi.Line{{Name: "a", Models: []string{"m"}, Weight: 2}} },
		"priority": func(r *abi.SelectRequest) {
			r.Lines = []abi.Line{{Name: "a", Models: []string{"m"}, Weight: 1, Priority: 1}}
		},
		"lines": func(r *abi.SelectRequest) { r.Lines = nil },
	}
	for name, change := range variants {
		t.Run(name, func(t *testing.T) {
			r := base
			change(&r)
			if key(r) == key(base) {
				t.Errorf("changing %s does not change the key", name)
			}
		})
	}
}

func TestPlanCache(t *testing.T) {
	t.Parallel()
	c := newPlanCache()
	plan := []abi.Step{{Line: "a", Weight: 1}, {Line: "b", Tier: 1, Weight: 1}}
	c.put([]byte("k"), plan)
	plan[0].Line = "changed by the caller"
	got, ok := c.get([]byte("k"))
	if !ok || got[0].Line != "a" {
		t.Fatalf("cache kept the caller's slice: %+v", got)
	}
	got[1].Line = "reordered"
	again, _ := c.get([]byte("k"))
	if again[1].Line != "b" {
		t.Fatal("get returned the cached slice itself")
	}
	if _, ok := c.get([]byte("other")); ok {
		t.Fatal("hit for an unknown key")
	}
	for i := range maxPlans + 10 {
		c.put([]byte{byte(i), byte(i >> 8), 'x'}, plan)
	}
	if n := len(c.plans); n > maxPlans {
		t.Fatalf("cache holds %d plans, bound is %d", n, maxPlans)
	}
}
