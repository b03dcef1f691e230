// Package gateway is ModelRelay's HTTP front and the pipeline of a relayed
// call. The Gateway routes (httprouter), authenticates keys, applies rate
// limits, writes the access log and the metrics, drains, and mounts its
// parts: the admin API (package admin), what a key holder reads (package
// holder), the web console (package console), the public pages. The relay
// type is a relayed call from end to end, calling the parts below in order.
//
// A relayed call runs: route → authenticate (an expired key 401, a client
// outside the key's allow-list 403) → rate limit → read and decode the body
// (package wire; only the fields the gateway needs) → admit the model →
// validate and quote with the model's plugin → hold the quote (package
// billing: the account's credit and the key's spend limit; 402 names which
// refused) → plan lines with the selection plugin → try lines (package
// lines; retries only before the first byte reaches the client) → relay the
// answer unchanged → settle from the real usage exactly once (package
// billing). A JSON answer is priced before it goes out, so that its
// x-relay-cost-usd header is the charge settled.
//
// Before any of it, the listener bounds open connections in total and per
// client address, and the server gives each phase of a request a deadline
// (package listen).
//
// Imports point down: the parts import package config (the settings) and
// package apierr (the error shape), never this package; only cmd/relay
// imports it.
//
// Where to start reading: relay.handler (relay.go) is a relayed call from
// end to end, and README.md's "A relayed call, step by step" names the
// function and file of each step (a test keeps it true).
//
// The gateway never writes a prompt, completion or uploaded file anywhere:
// bodies live in memory for the life of the call, and logs carry ids,
// models, statuses and amounts only. It must not import cmd/ or know any
// model by name: the catalogue comes from the plugins' descriptions.
package gateway
