// Package lines sends a relayed call upstream: the configured lines, each
// with its transport and circuit breaker, and the retry loop across them
// with what every call shares — the retry budget, panic mode when every
// line of a pool is open, conversation affinity, and the 429 cooldowns the
// replicas share through Redis.
//
// A Set is built once (New) and used by every call (Send). What a try needs
// of a call is its Request: the model, route and protocol that pick the
// pool, the body and caller's headers it forwards, and the conversation it
// belongs to. The order of lines to try is the selection plugin's plan: the
// gateway asks the plugin (it alone holds the plugin host), with States as
// the plugin's view of the lines, and passes the plan, ordered by OrderPlan,
// in Request.Plan. So the package knows nothing of plugins, keys or money,
// and imports only config, apierr and the shared Redis client.
//
// Errors are *apierr.Error with the codes and retry hints the caller gets
// (no_line_available, upstream_overloaded, upstream_rate_limited, ...),
// or the context's error when the client went away. The series the package
// keeps (relay_panic_calls_total, relay_line_breaker_state, ...) are its
// Collectors, which the gateway registers.
package lines
