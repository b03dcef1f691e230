package abi

// Version is the ABI version. The host calls ExportVersion at load and refuses
// a module whose answer differs, naming both versions.
//
// Version 2 writes integers, counts and lengths at fixed widths instead of
// version 1's varints (see the encoding notes in codec.go).
const Version uint32 = 2

// Names of the functions a guest exports.
const (
	// ExportVersion: func() uint32 — the guest's ABI version.
	ExportVersion = "mr_abi_version"
	// ExportAlloc: func(size uint32) uint32 — a guest buffer of size bytes the
	// host writes the next call's input into. The guest keeps it reachable,
	// at the same address and size, until the next mr_alloc: the host may
	// write a later call's input of at most that size into it without
	// calling mr_alloc again (one guarded entry fewer per call).
	ExportAlloc = "mr_alloc"
	// ExportCall: func(op, ptr, len uint32) uint64 — runs op on the input at
	// ptr/len and returns the result envelope as ptr<<32 | len.
	ExportCall = "mr_call"
)

// Op is an operation the host asks a guest to run.
type Op uint32

const (
	OpConfigure Op = 1 // input: the raw bytes of NAME.json (may be empty); result: empty
	OpDescribe  Op = 2 // input: empty; result: Description
	OpAdmit     Op = 3 // input: AdmitRequest; result: AdmitResult (validate + quote)
	OpSettle    Op = 4 // input: SettleRequest; result: SettleResult (price real usage)
	OpSelect    Op = 5 // input: SelectRequest; result: SelectResult (line plan)
)

// Capabilities a plugin can implement (Description.Implements).
const (
	CapValidate = "validate"
	CapQuote    = "quote"
	CapPrice    = "price"
	CapSelect   = "select"
)

// Error codes a guest may return. The host maps them to HTTP statuses:
// CodeInvalid → 400 (Field names the offending request field),
// CodeForbidden → 403, CodeUnprocessable → 422, anything else → 500.
const (
	CodeInvalid       = "invalid_request"
	CodeForbidden     = "forbidden"
	CodeUnprocessable = "unprocessable"
	CodeInternal      = "internal"
)

// Error is a structured error that crosses the boundary intact.
type Error struct {
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"` // the request field at fault, when there is one
	Message string `json:"message,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Param is one request field the host decoded for the plugin, as text
// (numbers in their decimal form). Repeated names are allowed.
type Param struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Price mirrors pricing.Price with plain integers (nano-USD; token prices per
// one million tokens). Sizes and Resolutions are ordered lists.
type Price struct {
	Unit              string `json:"unit"`
	Input             int64  `json:"input"`
	Output            int64  `json:"output"`
	CacheRead         int64  `json:"cache_read"`
	CacheWrite        int64  `json:"cache_write"`
	CacheWrite1h      int64  `json:"cache_write_1h"`
	HasLongContext    bool   `json:"has_long_context"`
	LongContextMin    int64  `json:"long_context_min"`
	LongContextInput  int64  `json:"long_context_input"`
	LongContextOutput int64  `json:"long_context_output"`
	Sizes             []Tier `json:"sizes,omitempty"`
	Resolutions       []Tier `json:"resolutions,omitempty"`
	UnitPrice         int64  `json:"unit_price"`
}

// Tier is one named price (a size tier or a resolution).
type Tier struct {
	Name  string `json:"name"`
	Price int64  `json:"price"`
}

// RoutePrice is a model's price on one route.
type RoutePrice struct {
	Route string `json:"route"`
	Price Price  `json:"price"`
}

// Source mirrors pricing.Source.
type Source struct {
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	URL        string `json:"url"`
	VerifiedAt string `json:"verified_at"`
	Model      string `json:"model"`
}

// Model describes one model a plugin serves.
type Model struct {
	ID              string       `json:"id"`
	Description     string       `json:"description"`
	Notice          string       `json:"notice,omitempty"`
	Endpoints       []string     `json:"endpoints"`
	ContextWindow   int64        `json:"context_window"`
	MaxOutput       int64        `json:"max_output"`
	AutoRoute       string       `json:"auto_route"`
	Routes          []RoutePrice `json:"routes"`
	HasReference    bool         `json:"has_reference"`
	Reference       Price        `json:"reference"`
	HasSource       bool         `json:"has_source"`
	ReferenceSource Source       `json:"reference_source"`
}

// Description is what a plugin says about itself at load (OpDescribe).
type Description struct {
	Name       string   `json:"name"`
	Implements []string `json:"implements"`
	Models     []Model  `json:"models"`
}

// AdmitRequest asks a model plugin to validate a call and quote the most it
// can cost. The host builds it from one parse of the request body.
type AdmitRequest struct {
	Now                 int64   `json:"now"` // unix nanoseconds; the plugin's only clock
	Endpoint            string  `json:"endpoint"`
	Model               string  `json:"model"`
	Route               string  `json:"route"`
	InputTokens         int64   `json:"input_tokens"`          // the host's conservative estimate of the input tokens
	MaxOutputTokens     int64   `json:"max_output_tokens"`     // from the request; 0 when absent
	DefaultOutputTokens int64   `json:"default_output_tokens"` // the configured output budget for when it is absent
	Stream              bool    `json:"stream"`
	Params              []Param `json:"params,omitempty"`
}

// AdmitResult is the quote: Hold is the most the call can cost in nano-USD.
// Set lists request fields the gateway must set in the forwarded body (for
// example an image size pinned to 1024x1024).
type AdmitResult struct {
	Hold int64   `json:"hold"`
	Set  []Param `json:"set,omitempty"`
}

// Usage mirrors pricing.Usage.
type Usage struct {
	InputTokens        int64  `json:"input_tokens"`
	CacheReadTokens    int64  `json:"cache_read_tokens"`
	CacheWriteTokens   int64  `json:"cache_write_tokens"`
	CacheWrite1hTokens int64  `json:"cache_write_1h_tokens"`
	OutputTokens       int64  `json:"output_tokens"`
	Images             int64  `json:"images"`
	SizeTier           string `json:"size_tier"`
	Seconds            int64  `json:"seconds"`
	Resolution         string `json:"resolution"`
	Requests           int64  `json:"requests"`
}

// SettleRequest asks a model plugin to price the real usage of a call.
type SettleRequest struct {
	Now      int64   `json:"now"`
	Endpoint string  `json:"endpoint"`
	Model    string  `json:"model"`
	Route    string  `json:"route"`
	Usage    Usage   `json:"usage"`
	Params   []Param `json:"params,omitempty"` // the same params the call was admitted with (after Set)
}

// SettleResult is the exact charge in nano-USD, rounded once, up.
type SettleResult struct {
	Charge int64 `json:"charge"`
}

// Line is one upstream line as the selection plugin sees it.
type Line struct {
	Name     string   `json:"name"`
	Route    string   `json:"route"`
	Models   []string // "*" serves every model of its route `json:"models"`
	Priority int64    `json:"priority"` // lower is tried first
	Weight   int64    `json:"weight"`   // share within a priority
	Open     bool     `json:"open"`     // circuit breaker open: do not plan it
}

// SelectRequest asks the line-selection plugin for a plan.
type SelectRequest struct {
	Now   int64  `json:"now"`
	Model string `json:"model"`
	Route string `json:"route"`
	Lines []Line `json:"lines"`
}

// Step is one line of a plan. Steps come ordered by Tier; the host orders the
// steps of one tier per request by weighted random choice, so a plan can be
// reused while the model, route and line health stay the same.
type Step struct {
	Line   string `json:"line"`
	Tier   int64  `json:"tier"`
	Weight int64  `json:"weight"`
}

// SelectResult is the ordered plan of lines to try.
type SelectResult struct {
	Plan []Step `json:"plan"`
}
