package pricing

// Nano is an amount of money in nano-USD: 1 USD = 1_000_000_000 Nano.
// Every amount on the path from usage to ledger is a Nano; floats never are.
type Nano int64

// NanoPerUSD is the number of Nano in one US dollar.
const NanoPerUSD Nano = 1_000_000_000

// Unit says what a Price charges for (docs/api.md#prices, a route price's `unit`).
type Unit string

const (
	PerMillionTokens Unit = "per_million_tokens"
	PerImage         Unit = "per_image"
	PerSecond        Unit = "per_second"
	PerRequest       Unit = "per_request"
)

// LongContext holds the prices that replace Input and Output when a call's
// total input tokens are above MinInputTokens.
type LongContext struct {
	MinInputTokens int64
	Input          Nano // nano-USD per 1M input tokens
	Output         Nano // nano-USD per 1M output tokens
}

// Price is one route price (docs/api.md#prices). Token prices are nano-USD per one
// million tokens; Sizes are nano-USD per image by size tier ("1K", "2K");
// Resolutions are nano-USD per second by resolution ("480p"); UnitPrice is
// nano-USD per request.
type Price struct {
	Unit         Unit
	Input        Nano
	Output       Nano
	CacheRead    Nano
	CacheWrite   Nano // 5-minute cache writes
	CacheWrite1h Nano // 1-hour cache writes
	LongContext  *LongContext
	Sizes        map[string]Nano
	Resolutions  map[string]Nano
	UnitPrice    Nano
}

// Source says where a reference price comes from (docs/api.md#prices,
// reference_price_source).
type Source struct {
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	URL        string `json:"url"`
	VerifiedAt string `json:"verified_at"`
	Model      string `json:"model"`
}

// Model is one sellable model as a plugin describes it: the catalogue entry the
// gateway's routing, model list and price table are built from.
type Model struct {
	ID              string
	Description     string
	Notice          string
	Endpoints       []string // endpoint types, see the Endpoint constants
	ContextWindow   int64    // 0 when unknown
	MaxOutput       int64    // 0 when unknown
	AutoRoute       string   // the route an Auto-route key uses
	Routes          map[string]Price
	Reference       *Price
	ReferenceSource *Source
}

// Endpoint types (docs/api.md#prices, supported_endpoint_types).
const (
	EndpointChat      = "chat_completions"
	EndpointResponses = "responses"
	EndpointMessages  = "messages"
	EndpointImages    = "image_generation"
	EndpointImageEdit = "image_edit"
	EndpointVideo     = "video_generation"
	EndpointSystemOne = "systemone"
)
