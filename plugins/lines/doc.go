// Command lines is ModelRelay's first-party line-selection plugin. Given the
// upstream lines the host knows (route, models, priority, weight, breaker
// state), it returns the plan of lines to try for one model on one route:
// the lines on that route that serve the model and whose circuit breaker is
// not open, grouped into tiers by priority (lower first), each step carrying
// its line's weight for the host's weighted choice within a tier. No line
// means an empty plan, which the host answers with 503.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o lines.wasm ./plugins/lines
//
// What it must not do: choose randomly (the host orders a tier by weight per
// request, so a plan can be cached while line health is unchanged), read a
// clock or anything outside its request, or take a configuration.
package main
