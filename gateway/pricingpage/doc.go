// Package pricingpage is the human-readable price page the gateway serves at
// GET /pricing: one self-contained HTML document (index.html, embedded at
// build time) whose script fetches GET /api/pricing and shows every model's
// prices per route beside the provider's list price, with filters by name
// and by endpoint type.
//
// What this package must not do: load anything from another origin (fonts,
// scripts, style sheets), compute prices (the page only formats the exact
// decimal text the API serves), or put data from the API into the page as
// markup (it is inserted as text).
package pricingpage
