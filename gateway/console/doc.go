// Package console is the web console served under /console/: account
// holders sign in with a login the operator issues and see their balance,
// a chart of daily spend, their keys, recent calls and prices; the operator
// signs in with the admin token and manages accounts and sees lines and
// plugins.
//
// Pages are server-rendered with html/template; the CSS and the one small
// script (the copy button) are embedded and served from /console/static/
// under a strict Content-Security-Policy with no inline script or style.
// The spend chart is an inline SVG drawn on the server.
//
// Sessions live in the store (store.Console): the cookie holds 32 random
// bytes and the store keeps only their hash. Every state-changing form
// carries the session's CSRF token; the sign-in and setup forms carry a
// token bound to a short-lived signed pre-session cookie. Failed sign-ins
// are rate-limited per client address and per login.
//
// A console cookie never opens /v1 or /admin (they read only the
// Authorization header), and the console ignores Authorization headers, so
// an API key never opens the console.
//
// The package imports store and pricing, never gateway: what it needs of
// the gateway (creating keys with the admin API's rules, prices, lines,
// plugins, rate limits, the admin token check) is the Backend interface,
// which package gateway implements. It never logs or stores a password,
// a session secret, a setup token or an API key.
package console
