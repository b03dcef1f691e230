// Package browsertest drives headless Chromium for tests: it starts the
// browser, opens tabs with cookies of their own, collects what a page
// reports as wrong (script errors, Content-Security-Policy violations),
// keeps screenshots as test artefacts, and walks the web console's pages
// the way a user does (set a password, sign in, create and revoke a key,
// find a call).
//
// It is a normal package rather than a _test.go file so that the gateway's
// tests and cmd/relay's (which drive `relay demo`) share it; only tests
// import it, and every function takes the test's testing.TB and fails it
// rather than returning an error. It needs Debian's chromium (or
// $RELAY_CHROMIUM) and fails, never skips, without it: a browser test that
// quietly does not run passes for one that works.
//
// Screenshots go to $RELAY_ARTIFACTS, or build/artifacts under the module
// root.
package browsertest
