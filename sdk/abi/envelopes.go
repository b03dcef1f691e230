package abi

// The encoding of each envelope type, in the layout codec.go describes:
// AppendTo writes the fields in declaration order, Decode reads a whole
// value (trailing bytes are an error), and decode reads one from a decoder
// already positioned, for values nested in another.

// ---- Error ----

// AppendTo appends the encoding of e to b.
func (e *Error) AppendTo(b []byte) []byte {
	b = appendString(b, e.Code)
	b = appendString(b, e.Field)
	return appendString(b, e.Message)
}

// Decode replaces e with the value encoded in b.
func (e *Error) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Error")
	e.decode(&d)
	return d.finish()
}

func (e *Error) decode(d *decoder) {
	e.Code = d.string("Code")
	e.Field = d.string("Field")
	e.Message = d.string("Message")
}

// ---- Param ----

// AppendTo appends the encoding of p to b.
func (p *Param) AppendTo(b []byte) []byte {
	b = appendString(b, p.Name)
	return appendString(b, p.Value)
}

// Decode replaces p with the value encoded in b.
func (p *Param) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Param")
	p.decode(&d)
	return d.finish()
}

func (p *Param) decode(d *decoder) {
	p.Name = d.string("Name")
	p.Value = d.string("Value")
}

func appendParams(b []byte, list []Param) []byte { return appendList(b, list, (*Param).AppendTo) }

// ---- Tier ----

// AppendTo appends the encoding of t to b.
func (t *Tier) AppendTo(b []byte) []byte {
	b = appendString(b, t.Name)
	return appendInt(b, t.Price)
}

// Decode replaces t with the value encoded in b.
func (t *Tier) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Tier")
	t.decode(&d)
	return d.finish()
}

func (t *Tier) decode(d *decoder) {
	t.Name = d.string("Name")
	t.Price = d.int("Price")
}

// ---- Price ----

// AppendTo appends the encoding of p to b. The long-context prices are
// written only when HasLongContext is set.
func (p *Price) AppendTo(b []byte) []byte {
	b = appendString(b, p.Unit)
	b = appendInt(b, p.Input)
	b = appendInt(b, p.Output)
	b = appendInt(b, p.CacheRead)
	b = appendInt(b, p.CacheWrite)
	b = appendInt(b, p.CacheWrite1h)
	b = appendBool(b, p.HasLongContext)
	if p.HasLongContext {
		b = appendInt(b, p.LongContextMin)
		b = appendInt(b, p.LongContextInput)
		b = appendInt(b, p.LongContextOutput)
	}
	b = appendList(b, p.Sizes, (*Tier).AppendTo)
	b = appendList(b, p.Resolutions, (*Tier).AppendTo)
	return appendInt(b, p.UnitPrice)
}

// Decode replaces p with the value encoded in b.
func (p *Price) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Price")
	p.decode(&d)
	return d.finish()
}

func (p *Price) decode(d *decoder) {
	*p = Price{}
	p.Unit = d.string("Unit")
	p.Input = d.int("Input")
	p.Output = d.int("Output")
	p.CacheRead = d.int("CacheRead")
	p.CacheWrite = d.int("CacheWrite")
	p.CacheWrite1h = d.int("CacheWrite1h")
	p.HasLongContext = d.bool("HasLongContext")
	if p.HasLongContext {
		p.LongContextMin = d.int("LongContextMin")
		p.LongContextInput = d.int("LongContextInput")
		p.LongContextOutput = d.int("LongContextOutput")
	}
	p.Sizes = decodeList(d, "Sizes", minTier, func(t *Tier) { t.decode(d) })
	p.Resolutions = decodeList(d, "Resolutions", minTier, func(t *Tier) { t.decode(d) })
	p.UnitPrice = d.int("UnitPrice")
}

// ---- RoutePrice ----

// AppendTo appends the encoding of r to b.
func (r *RoutePrice) AppendTo(b []byte) []byte {
	b = appendString(b, r.Route)
	return r.Price.AppendTo(b)
}

// Decode replaces r with the value encoded in b.
func (r *RoutePrice) Decode(b []byte) error {
	var d decoder
	d.reset(b, "RoutePrice")
	r.decode(&d)
	return d.finish()
}

func (r *RoutePrice) decode(d *decoder) {
	r.Route = d.string("Route")
	d.push("Price", -1)
	r.Price.decode(d)
	d.pop()
}

// ---- Source ----

// AppendTo appends the encoding of s to b.
func (s *Source) AppendTo(b []byte) []byte {
	b = appendString(b, s.Kind)
	b = appendString(b, s.Name)
	b = appendString(b, s.URL)
	b = appendString(b, s.VerifiedAt)
	return appendString(b, s.Model)
}

// Decode replaces s with the value encoded in b.
func (s *Source) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Source")
	s.decode(&d)
	return d.finish()
}

func (s *Source) decode(d *decoder) {
	s.Kind = d.string("Kind")
	s.Name = d.string("Name")
	s.URL = d.string("URL")
	s.VerifiedAt = d.string("VerifiedAt")
	s.Model = d.string("Model")
}

// ---- Model ----

// AppendTo appends the encoding of m to b. Reference and ReferenceSource are
// written only when HasReference and HasSource are set.
func (m *Model) AppendTo(b []byte) []byte {
	b = appendString(b, m.ID)
	b = appendString(b, m.Description)
	b = appendString(b, m.Notice)
	b = appendStrings(b, m.Endpoints)
	b = appendInt(b, m.ContextWindow)
	b = appendInt(b, m.MaxOutput)
	b = appendString(b, m.AutoRoute)
	b = appendList(b, m.Routes, (*RoutePrice).AppendTo)
	b = appendBool(b, m.HasReference)
	if m.HasReference {
		b = m.Reference.AppendTo(b)
	}
	b = appendBool(b, m.HasSource)
	if m.HasSource {
		b = m.ReferenceSource.AppendTo(b)
	}
	return b
}

// Decode replaces m with the value encoded in b.
func (m *Model) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Model")
	m.decode(&d)
	return d.finish()
}

func (m *Model) decode(d *decoder) {
	*m = Model{}
	m.ID = d.string("ID")
	m.Description = d.string("Description")
	m.Notice = d.string("Notice")
	m.Endpoints = d.strings("Endpoints")
	m.ContextWindow = d.int("ContextWindow")
	m.MaxOutput = d.int("MaxOutput")
	m.AutoRoute = d.string("AutoRoute")
	m.Routes = decodeList(d, "Routes", minRoutePrice, func(r *RoutePrice) { r.decode(d) })
	m.HasReference = d.bool("HasReference")
	if m.HasReference {
		d.push("Reference", -1)
		m.Reference.decode(d)
		d.pop()
	}
	m.HasSource = d.bool("HasSource")
	if m.HasSource {
		d.push("ReferenceSource", -1)
		m.ReferenceSource.decode(d)
		d.pop()
	}
}

// ---- Description ----

// AppendTo appends the encoding of x to b.
func (x *Description) AppendTo(b []byte) []byte {
	b = appendString(b, x.Name)
	b = appendStrings(b, x.Implements)
	return appendList(b, x.Models, (*Model).AppendTo)
}

// Decode replaces x with the value encoded in b.
func (x *Description) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Description")
	x.decode(&d)
	return d.finish()
}

func (x *Description) decode(d *decoder) {
	x.Name = d.string("Name")
	x.Implements = d.strings("Implements")
	x.Models = decodeList(d, "Models", minModel, func(m *Model) { m.decode(d) })
}

// ---- AdmitRequest / AdmitResult ----

// AppendTo appends the encoding of r to b.
func (r *AdmitRequest) AppendTo(b []byte) []byte {
	b = appendInt(b, r.Now)
	b = appendString(b, r.Endpoint)
	b = appendString(b, r.Model)
	b = appendString(b, r.Route)
	b = appendInt(b, r.InputTokens)
	b = appendInt(b, r.MaxOutputTokens)
	b = appendInt(b, r.DefaultOutputTokens)
	b = appendBool(b, r.Stream)
	return appendParams(b, r.Params)
}

// Decode replaces r with the value encoded in b.
func (r *AdmitRequest) Decode(b []byte) error { return r.DecodeReusing(b, nil) }

// DecodeReusing is Decode reusing the strings of the previous decode kept in
// strs (nil: none), and remembering this decode's there.
func (r *AdmitRequest) DecodeReusing(b []byte, strs *Strings) error {
	var d decoder
	d.reset(b, "AdmitRequest")
	d.strs = strs
	r.decode(&d)
	return d.finish()
}

func (r *AdmitRequest) decode(d *decoder) {
	r.Now = d.int("Now")
	r.Endpoint = d.string("Endpoint")
	r.Model = d.string("Model")
	r.Route = d.string("Route")
	r.InputTokens = d.int("InputTokens")
	r.MaxOutputTokens = d.int("MaxOutputTokens")
	r.DefaultOutputTokens = d.int("DefaultOutputTokens")
	r.Stream = d.bool("Stream")
	r.Params = decodeList(d, "Params", minParam, func(p *Param) { p.decode(d) })
}

// AppendTo appends the encoding of r to b.
func (r *AdmitResult) AppendTo(b []byte) []byte {
	b = appendInt(b, r.Hold)
	return appendParams(b, r.Set)
}

// Decode replaces r with the value encoded in b.
func (r *AdmitResult) Decode(b []byte) error {
	var d decoder
	d.reset(b, "AdmitResult")
	r.decode(&d)
	return d.finish()
}

func (r *AdmitResult) decode(d *decoder) {
	r.Hold = d.int("Hold")
	r.Set = decodeList(d, "Set", minParam, func(p *Param) { p.decode(d) })
}

// ---- Usage / SettleRequest / SettleResult ----

// AppendTo appends the encoding of u to b.
func (u *Usage) AppendTo(b []byte) []byte {
	b = appendInt(b, u.InputTokens)
	b = appendInt(b, u.CacheReadTokens)
	b = appendInt(b, u.CacheWriteTokens)
	b = appendInt(b, u.CacheWrite1hTokens)
	b = appendInt(b, u.OutputTokens)
	b = appendInt(b, u.Images)
	b = appendString(b, u.SizeTier)
	b = appendInt(b, u.Seconds)
	b = appendString(b, u.Resolution)
	return appendInt(b, u.Requests)
}

// Decode replaces u with the value encoded in b.
func (u *Usage) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Usage")
	u.decode(&d)
	return d.finish()
}

func (u *Usage) decode(d *decoder) {
	u.InputTokens = d.int("InputTokens")
	u.CacheReadTokens = d.int("CacheReadTokens")
	u.CacheWriteTokens = d.int("CacheWriteTokens")
	u.CacheWrite1hTokens = d.int("CacheWrite1hTokens")
	u.OutputTokens = d.int("OutputTokens")
	u.Images = d.int("Images")
	u.SizeTier = d.string("SizeTier")
	u.Seconds = d.int("Seconds")
	u.Resolution = d.string("Resolution")
	u.Requests = d.int("Requests")
}

// AppendTo appends the encoding of r to b.
func (r *SettleRequest) AppendTo(b []byte) []byte {
	b = appendInt(b, r.Now)
	b = appendString(b, r.Endpoint)
	b = appendString(b, r.Model)
	b = appendString(b, r.Route)
	b = r.Usage.AppendTo(b)
	return appendParams(b, r.Params)
}

// Decode replaces r with the value encoded in b.
func (r *SettleRequest) Decode(b []byte) error { return r.DecodeReusing(b, nil) }

// DecodeReusing is Decode reusing the strings of the previous decode kept in
// strs (nil: none), and remembering this decode's there.
func (r *SettleRequest) DecodeReusing(b []byte, strs *Strings) error {
	var d decoder
	d.reset(b, "SettleRequest")
	d.strs = strs
	r.decode(&d)
	return d.finish()
}

func (r *SettleRequest) decode(d *decoder) {
	r.Now = d.int("Now")
	r.Endpoint = d.string("Endpoint")
	r.Model = d.string("Model")
	r.Route = d.string("Route")
	d.push("Usage", -1)
	r.Usage.decode(d)
	d.pop()
	r.Params = decodeList(d, "Params", minParam, func(p *Param) { p.decode(d) })
}

// AppendTo appends the encoding of r to b.
func (r *SettleResult) AppendTo(b []byte) []byte { return appendInt(b, r.Charge) }

// Decode replaces r with the value encoded in b.
func (r *SettleResult) Decode(b []byte) error {
	var d decoder
	d.reset(b, "SettleResult")
	r.decode(&d)
	return d.finish()
}

func (r *SettleResult) decode(d *decoder) { r.Charge = d.int("Charge") }

// ---- Line / SelectRequest / Step / SelectResult ----

// AppendTo appends the encoding of l to b.
func (l *Line) AppendTo(b []byte) []byte {
	b = appendString(b, l.Name)
	b = appendString(b, l.Route)
	b = appendStrings(b, l.Models)
	b = appendInt(b, l.Priority)
	b = appendInt(b, l.Weight)
	return appendBool(b, l.Open)
}

// Decode replaces l with the value encoded in b.
func (l *Line) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Line")
	l.decode(&d)
	return d.finish()
}

func (l *Line) decode(d *decoder) {
	l.Name = d.string("Name")
	l.Route = d.string("Route")
	l.Models = d.strings("Models")
	l.Priority = d.int("Priority")
	l.Weight = d.int("Weight")
	l.Open = d.bool("Open")
}

// AppendTo appends the encoding of r to b.
func (r *SelectRequest) AppendTo(b []byte) []byte {
	b = appendInt(b, r.Now)
	b = appendString(b, r.Model)
	b = appendString(b, r.Route)
	return appendList(b, r.Lines, (*Line).AppendTo)
}

// Decode replaces r with the value encoded in b.
func (r *SelectRequest) Decode(b []byte) error { return r.DecodeReusing(b, nil) }

// DecodeReusing is Decode reusing the strings of the previous decode kept in
// strs (nil: none), and remembering this decode's there.
func (r *SelectRequest) DecodeReusing(b []byte, strs *Strings) error {
	var d decoder
	d.reset(b, "SelectRequest")
	d.strs = strs
	r.decode(&d)
	return d.finish()
}

func (r *SelectRequest) decode(d *decoder) {
	r.Now = d.int("Now")
	r.Model = d.string("Model")
	r.Route = d.string("Route")
	r.Lines = decodeList(d, "Lines", minLine, func(l *Line) { l.decode(d) })
}

// AppendTo appends the encoding of s to b.
func (s *Step) AppendTo(b []byte) []byte {
	b = appendString(b, s.Line)
	b = appendInt(b, s.Tier)
	return appendInt(b, s.Weight)
}

// Decode replaces s with the value encoded in b.
func (s *Step) Decode(b []byte) error {
	var d decoder
	d.reset(b, "Step")
	s.decode(&d)
	return d.finish()
}

func (s *Step) decode(d *decoder) {
	s.Line = d.string("Line")
	s.Tier = d.int("Tier")
	s.Weight = d.int("Weight")
}

// AppendTo appends the encoding of r to b.
func (r *SelectResult) AppendTo(b []byte) []byte {
	return appendList(b, r.Plan, (*Step).AppendTo)
}

// Decode replaces r with the value encoded in b.
func (r *SelectResult) Decode(b []byte) error {
	var d decoder
	d.reset(b, "SelectResult")
	r.decode(&d)
	return d.finish()
}

func (r *SelectResult) decode(d *decoder) {
	r.Plan = decodeList(d, "Plan", minStep, func(s *Step) { s.decode(d) })
}
