// Package openapi holds ModelRelay's machine-readable description: the
// OpenAPI 3.1.0 document (openapi.json, version label 2026-09-19) that the
// gateway serves at GET /openapi.json. The document is hand-written JSON,
// embedded at build time; the gateway's tests validate it against the
// official OpenAPI 3.1 schema and validate real requests and responses
// against it.
//
// What this package must not do: build or change the document at run time,
// import anything but the standard library, or describe behaviour the
// service specification does not have.
package openapi
