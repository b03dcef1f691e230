// Package codeshape holds tests about the shape of the module's code rather
// than its behaviour: that no function is longer than maxLines, and that no
// Markdown file refers to a work session or an issue by number (a document
// says what is decided and why; the git history keeps how it came about).
//
// The test parses every non-test, non-generated .go file of the module
// (files ending in _test.go are exempt for now: table-driven tests run
// long; generated files carry the "Code generated … DO NOT EDIT." line).
// A function's length counts from its func keyword to its closing brace.
//
// It has no code of its own: run it with go test ./internal/codeshape/.
// When a function is over the limit, split it into steps that read top to
// bottom rather than chunks.
package codeshape
