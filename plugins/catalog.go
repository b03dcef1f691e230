package plugins

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// Catalog is an immutable snapshot of the loaded plugins and the models they
// serve. A reload builds a new Catalog and swaps it in atomically; a Catalog
// obtained earlier keeps describing the plugins as they were.
//
// The pricing.Model values it returns share their maps and pointers with the
// snapshot: read them, never modify them.
type Catalog struct {
	versions map[string]*version // by plugin name
	byModel  map[string]*version // model id → the plugin serving it
	models   map[string]pricing.Model
	sorted   []pricing.Model // by id
	selector *version        // the plugin implementing select, or nil
	infos    []PluginInfo    // by plugin name
}

// PluginInfo describes one loaded plugin.
type PluginInfo struct {
	Name       string    // the file name without .wasm
	File       string    // path of the .wasm file
	Implements []string  // capabilities (abi.CapValidate, …)
	Models     []string  // ids of the models it serves, sorted
	SHA256     string    // hex sha256 of the .wasm file
	Config     string    // hex sha256 of NAME.json; "" when there is none
	Loaded     time.Time // when this version was loaded
}

// Model returns the model with the given id.
func (c *Catalog) Model(id string) (pricing.Model, bool) {
	m, ok := c.models[id]
	return m, ok
}

// PluginFor returns the name of the plugin serving model, or "".
func (c *Catalog) PluginFor(model string) string {
	if v := c.byModel[model]; v != nil {
		return v.name
	}
	return ""
}

// Models returns every model, sorted by id. The slice is the caller's.
func (c *Catalog) Models() []pricing.Model { return slices.Clone(c.sorted) }

// Plugins returns the loaded plugins, sorted by name. The slice is the
// caller's.
func (c *Catalog) Plugins() []PluginInfo { return slices.Clone(c.infos) }

func newCatalog() *Catalog {
	return &Catalog{
		versions: make(map[string]*version),
		byModel:  make(map[string]*version),
		models:   make(map[string]pricing.Model),
	}
}

// buildCatalog indexes versions. It fails, naming both plugins, when two
// plugins claim one model or both implement select.
func buildCatalog(versions map[string]*version) (*Catalog, error) {
	c := newCatalog()
	for _, name := range slices.Sorted(maps.Keys(versions)) {
		if err := c.add(versions[name]); err != nil {
			return nil, err
		}
	}
	c.finish()
	return c, nil
}

// finish sorts the lists once every version is added.
func (c *Catalog) finish() {
	slices.SortFunc(c.sorted, func(a, b pricing.Model) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(c.infos, func(a, b PluginInfo) int { return strings.Compare(a.Name, b.Name) })
}

// add indexes one version, refusing a conflict with what is indexed already;
// a refused version leaves c unchanged.
func (c *Catalog) add(v *version) error {
	for _, m := range v.models {
		if other := c.byModel[m.ID]; other != nil {
			return &Error{Plugin: v.name, Op: "load", Err: fmt.Errorf("model %q is already served by plugin %s", m.ID, other.name)}
		}
	}
	if v.implements(abi.CapSelect) {
		if c.selector != nil {
			return &Error{Plugin: v.name, Op: "load", Err: fmt.Errorf("plugin %s already implements select; only one plugin may", c.selector.name)}
		}
		c.selector = v
	}
	c.versions[v.name] = v
	info := PluginInfo{
		Name:       v.name,
		File:       v.path,
		Implements: slices.Clone(v.desc.Implements),
		SHA256:     v.sum,
		Config:     v.cfgSum,
		Loaded:     v.loaded,
	}
	for _, m := range v.models {
		c.byModel[m.ID] = v
		c.models[m.ID] = m
		c.sorted = append(c.sorted, m)
		info.Models = append(info.Models, m.ID)
	}
	slices.Sort(info.Models)
	c.infos = append(c.infos, info)
	return nil
}

// knownCapabilities are the values Description.Implements may hold.
var knownCapabilities = []string{abi.CapValidate, abi.CapQuote, abi.CapPrice, abi.CapSelect}

// validateDescription checks what a plugin says about itself and converts its
// models to pricing.Model. A plugin that serves models must implement quote
// and price (the host sends them OpAdmit and OpSettle); a plugin must
// implement something. The error names the model and field at fault.
func validateDescription(d *abi.Description) ([]pricing.Model, error) {
	if len(d.Implements) == 0 {
		return nil, errors.New("implements nothing")
	}
	for i, c := range d.Implements {
		if !slices.Contains(knownCapabilities, c) {
			return nil, fmt.Errorf("implements[%d]: unknown capability %q (known: %v)", i, c, knownCapabilities)
		}
		if slices.Contains(d.Implements[:i], c) {
			return nil, fmt.Errorf("implements[%d]: %q is listed twice", i, c)
		}
	}
	if len(d.Models) > 0 {
		for _, need := range []string{abi.CapQuote, abi.CapPrice} {
			if !slices.Contains(d.Implements, need) {
				return nil, fmt.Errorf("serves %d models but does not implement %q", len(d.Models), need)
			}
		}
	}
	models := make([]pricing.Model, 0, len(d.Models))
	seen := make(map[string]bool, len(d.Models))
	for i := range d.Models {
		am := &d.Models[i]
		if seen[am.ID] {
			return nil, fmt.Errorf("models[%d]: model %q is listed twice", i, am.ID)
		}
		seen[am.ID] = true
		m, err := convertModel(am)
		if err != nil {
			return nil, fmt.Errorf("model %q: %w", am.ID, err)
		}
		models = append(models, m)
	}
	return models, nil
}

// convertModel turns the ABI form of a model into pricing.Model and validates
// it with pricing's rules. An auto_route is required: an Auto-route key has
// to know which route's lines and prices to use.
func convertModel(am *abi.Model) (pricing.Model, error) {
	m := pricing.Model{
		ID:            am.ID,
		Description:   am.Description,
		Notice:        am.Notice,
		Endpoints:     slices.Clone(am.Endpoints),
		ContextWindow: am.ContextWindow,
		MaxOutput:     am.MaxOutput,
		AutoRoute:     am.AutoRoute,
		Routes:        make(map[string]pricing.Price, len(am.Routes)),
	}
	for i := range am.Routes {
		r := &am.Routes[i]
		if _, dup := m.Routes[r.Route]; dup {
			return pricing.Model{}, fmt.Errorf("routes[%d]: route %q is listed twice", i, r.Route)
		}
		p, err := convertPrice(&r.Price)
		if err != nil {
			return pricing.Model{}, fmt.Errorf("routes.%s: %w", r.Route, err)
		}
		m.Routes[r.Route] = p
	}
	if am.HasReference {
		p, err := convertPrice(&am.Reference)
		if err != nil {
			return pricing.Model{}, fmt.Errorf("reference_price: %w", err)
		}
		m.Reference = &p
	}
	if am.HasSource {
		s := pricing.Source(am.ReferenceSource)
		m.ReferenceSource = &s
	}
	if m.AutoRoute == "" {
		return pricing.Model{}, errors.New("auto_route: required")
	}
	if err := m.Validate(); err != nil {
		return pricing.Model{}, err
	}
	return m, nil
}

// UsageToABI converts a usage to its wire form, the Usage of a
// SettleRequest. pricing.Usage and abi.Usage have the same fields in the
// same order (only their JSON tags differ), so this is a conversion: a field
// added to one and not the other stops the build here rather than dropping
// a count on the way.
func UsageToABI(u pricing.Usage) abi.Usage { return abi.Usage(u) }

func convertPrice(ap *abi.Price) (pricing.Price, error) {
	p := pricing.Price{
		Unit:         pricing.Unit(ap.Unit),
		Input:        pricing.Nano(ap.Input),
		Output:       pricing.Nano(ap.Output),
		CacheRead:    pricing.Nano(ap.CacheRead),
		CacheWrite:   pricing.Nano(ap.CacheWrite),
		CacheWrite1h: pricing.Nano(ap.CacheWrite1h),
		UnitPrice:    pricing.Nano(ap.UnitPrice),
	}
	if ap.HasLongContext {
		p.LongContext = &pricing.LongContext{
			MinInputTokens: ap.LongContextMin,
			Input:          pricing.Nano(ap.LongContextInput),
			Output:         pricing.Nano(ap.LongContextOutput),
		}
	}
	var err error
	if p.Sizes, err = tierMap("sizes", ap.Sizes); err != nil {
		return pricing.Price{}, err
	}
	if p.Resolutions, err = tierMap("resolutions", ap.Resolutions); err != nil {
		return pricing.Price{}, err
	}
	return p, p.Validate()
}

func tierMap(field string, tiers []abi.Tier) (map[string]pricing.Nano, error) {
	if len(tiers) == 0 {
		return nil, nil
	}
	m := make(map[string]pricing.Nano, len(tiers))
	for i, t := range tiers {
		if _, dup := m[t.Name]; dup {
			return nil, fmt.Errorf("%s[%d]: %q is listed twice", field, i, t.Name)
		}
		m[t.Name] = pricing.Nano(t.Price)
	}
	return m, nil
}
