// Package gateway is ModelRelay's HTTP front: routing (httprouter), key
// authentication, rate limits, request decoding, admission (403/400/402),
// line selection with retries and circuit breakers, the relay of JSON and
// SSE answers, settlement, the mounts of what a key holder can read of its
// key and account (package holder), of the admin API and of the web console
// (their handlers and the console's backend are package admin, the pages
// package console), and the one function that writes every error body
// (docs/api.md#errors).
//
// A relayed call runs, in order: route → authenticate (an expired key 401,
// a client outside the key's allow-list 403) → rate limit → read and
// decode the body (only the fields the gateway needs) → admit the model →
// validate and quote with the model's plugin → hold the quote on the
// ledger (the account's credit and the key's spend limit; 402 names which
// refused) → plan lines with the selection plugin → try lines (retries only
// before the first byte reaches the client) → relay the answer unchanged →
// settle from the real usage exactly once. A JSON answer is priced before
// it goes out, so that its x-relay-cost-usd header is the charge settled.
//
// Before any of it, the listener bounds open connections in total and per
// client address, and the server gives each phase of a request a deadline
// (package listen).
//
// Where to start reading: relayHandler (relay.go) is a relayed call from
// end to end, and README.md's "A relayed call, step by step" names the
// function of each step; package config is the configuration; package apierr the
// error shape.
//
// The gateway never writes a prompt, completion or uploaded file anywhere:
// bodies live in memory for the life of the call, and logs carry ids,
// models, statuses and amounts only. It must not import cmd/ or know any
// model by name: the catalogue comes from the plugins' descriptions.
package gateway
