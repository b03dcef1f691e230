// Package listen is the gateway's client listener: it bounds the open
// connections in total and per client address, refuses the rest with a
// 503 in the error shape (docs/api.md#errors), sets a server's deadline per
// phase of a request, rewrites net/http's own plain-text errors into the
// error shape, and closes gently a connection answered without reading its
// body. It imports nothing of the gateway but its configuration and its
// error type; the request id of a refusal comes from the caller.
package listen
