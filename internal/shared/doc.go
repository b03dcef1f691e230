// Package shared connects gateway replicas through Redis: the redis:
// section of the configuration, one client with short per-command
// timeouts, its health (up or down, a log line per change, metrics, a
// background ping that notices recovery) and the pub/sub subscription
// replicas tell each other things on.
//
// It knows nothing of keys, limits or lines: the gateway decides what to
// share and what to do while Redis is down. Money never passes through it:
// the ledger alone decides admission and charges.
//
// Without a URL there is no Client, and every replica keeps its own limits,
// key cache and cooldowns (single-replica behaviour).
package shared
