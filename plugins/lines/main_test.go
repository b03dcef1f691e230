package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/sdktest"
)

func TestFixtures(t *testing.T) { sdktest.Run(t, "../../testdata/plugins/lines") }

func TestDescribe(t *testing.T) {
	d := sdktest.Setup(t)
	if d.Name != "lines" || !reflect.DeepEqual(d.Implements, []string{abi.CapSelect}) || len(d.Models) != 0 {
		t.Fatalf("Describe = %+v", d)
	}
	if err := sdktest.Configure([]byte(`{}`)); err == nil || !strings.Contains(err.Error(), "takes no configuration") {
		t.Fatalf("Configure with a config: %v", err)
	}
}

func line(name, route string, priority, weight int64, open bool, models ...string) abi.Line {
	return abi.Line{Name: name, Route: route, Models: models, Priority: priority, Weight: weight, Open: open}
}

func TestPlan(t *testing.T) {
	const m = "modelb-6-astra"
	tests := []struct {
		name  string
		route string
		lines []abi.Line
		want  []abi.Step
		err   string
	}{
		{"no lines", "standard", nil, []abi.Step{}, ""},
		{"one line", "standard", []abi.Line{line("a", "standard", 0, 1, false, m)},
			[]abi.Step{{Line: "a", Tier: 0, Weight: 1}}, ""},
		{"priorities become tiers", "standard", []abi.Line{
			line("late", "standard", 20, 1, false, m),
			line("first", "standard", -5, 3, false, m),
			line("mid", "standard", 10, 2, false, m),
		}, []abi.Step{{Line: "first", Tier: 0, Weight: 3}, {Line: "mid", Tier: 1, Weight: 2}, {Line: "late", Tier: 2, Weight: 1}}, ""},
		{"one tier keeps the host's order", "standard", []abi.Line{
			line("b", "standard", 1, 5, false, m),
			line("a", "standard", 1, 1, false, m),
			line("c", "standard", 0, 0, false, m),
		}, []abi.Step{{Line: "c", Tier: 0, Weight: 0}, {Line: "b", Tier: 1, Weight: 5}, {Line: "a", Tier: 1, Weight: 1}}, ""},
		{"open breakers skipped", "standard", []abi.Line{
			line("a", "standard", 0, 1, true, m),
			line("b", "standard", 1, 1, false, m),
		}, []abi.Step{{Line: "b", Tier: 0, Weight: 1}}, ""},
		{"other route and model filtered", "economy", []abi.Line{
			line("std", "standard", 0, 1, false, m),
			line("eco-other", "economy", 0, 1, false, "modelc-4.7"),
			line("eco", "economy", 3, 2, false, "modelc-4.7", m),
		}, []abi.Step{{Line: "eco", Tier: 0, Weight: 2}}, ""},
		{"wildcard serves every model of its route", "standard", []abi.Line{
			line("any", "standard", 0, 1, false, "*"),
			line("eco-any", "economy", 0, 1, false, "*"),
		}, []abi.Step{{Line: "any", Tier: 0, Weight: 1}}, ""},
		{"all open", "standard", []abi.Line{line("a", "standard", 0, 1, true, m)}, []abi.Step{}, ""},
		{"negative weight", "standard", []abi.Line{line("bad", "standard", 0, -1, false, m)}, nil, "line bad has a negative weight (-1)"},
		{"negative weight on a skipped line is ignored", "standard", []abi.Line{
			line("bad", "standard", 0, -1, true, m), line("ok", "standard", 0, 1, false, m),
		}, []abi.Step{{Line: "ok", Tier: 0, Weight: 1}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := plan(abi.SelectRequest{Model: m, Route: tt.route, Lines: tt.lines})
			if tt.err != "" {
				ae, ok := err.(*abi.Error)
				if !ok || ae.Code != abi.CodeInternal || !strings.Contains(ae.Message, tt.err) {
					t.Fatalf("err = %#v, want internal %q", err, tt.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(res.Plan, tt.want) {
				t.Fatalf("plan = %+v, %v; want %+v", res.Plan, err, tt.want)
			}
		})
	}
}

// The plan is a function of its request: the host may cache it while the
// model, route and line health stay the same.
func TestPlanIsDeterministic(t *testing.T) {
	req := abi.SelectRequest{Model: "m", Route: "r", Lines: []abi.Line{
		line("a", "r", 1, 1, false, "m"), line("b", "r", 1, 2, false, "m"), line("c", "r", 0, 3, false, "m"),
	}}
	first, _ := plan(req)
	for i := 0; i < 50; i++ {
		again, _ := plan(req)
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("plan changed: %+v then %+v", first, again)
		}
	}
}

func BenchmarkPlan(b *testing.B) {
	req := abi.SelectRequest{Model: "m", Route: "r"}
	for i := 0; i < 8; i++ {
		req.Lines = append(req.Lines, line(string(rune('a'+i)), "r", int64(i%3), 1, i == 5, "m", "n"))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := plan(req); err != nil {
			b.Fatal(err)
		}
	}
}
