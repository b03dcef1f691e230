package openapi

import (
	_ "embed"
	"slices"
)

//go:embed openapi.json
var document []byte

// Version is the document's info.version label (docs/api.md#versioning).
const Version = "2026-09-19"

// Document returns the OpenAPI 3.1.0 document as JSON. The slice is the
// caller's.
func Document() []byte { return slices.Clone(document) }
