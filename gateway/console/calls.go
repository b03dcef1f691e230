package console

import (
	"encoding/csv"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// Recent calls come from the journal: every charge, refund and recovery
// (a released hold moves no money and leaves no entry).
const (
	maxCallsShown = 200  // rows on the page and in the CSV
	maxCallsRead  = 5000 // journal entries read to find them
)

// call is one journal entry as the calls page and CSV show it: never
// content.
type call struct {
	Time      time.Time
	RequestID string
	KeyID     string
	Model     string
	Route     string
	Endpoint  string
	Status    string // charged, refunded, recovered
	Note      string // why, where it is the gateway's own text
	Usage     pricing.Usage
	Cost      pricing.Nano // what the call cost the account (a refund is negative)
	Estimated bool
}

// callFilter selects calls by key and model ("" any).
type callFilter struct {
	Key, Model string
}

// parseCallFilter reads ?key= and ?model=, bounded.
func parseCallFilter(q map[string][]string) (callFilter, error) {
	get := func(n string) string {
		if v := q[n]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	f := callFilter{Key: get("key"), Model: get("model")}
	if len(f.Key) > 64 || (f.Key != "" && store.CheckID("key", f.Key) != nil) {
		return f, errorf(http.StatusBadRequest, "key", "key: not a key id (key_…)")
	}
	if len(f.Model) > 256 {
		return f, errorf(http.StatusBadRequest, "model", "model: at most 256 bytes")
	}
	return f, nil
}

func callOf(e store.Entry) (call, bool) {
	c := call{Time: e.Time, RequestID: e.RequestID, KeyID: e.KeyID, Model: e.Model, Route: e.Route,
		Endpoint: e.Endpoint, Usage: e.Usage, Cost: -e.Amount}
	switch e.Kind {
	case store.KindCharge:
		c.Status = "charged"
		c.Estimated = store.Estimated(e.Note)
		if c.Estimated {
			c.Note = e.Note
		}
	case store.KindRefund:
		c.Status = "refunded"
		c.Note = e.Note
	case store.KindRecovery:
		c.Status = "recovered"
		c.Note = "hold released at start-up; nothing charged"
	default:
		return c, false
	}
	c.Note = store.ClipNote(c.Note)
	return c, true
}

// calls lists the account's recent calls matching f, newest first, and
// the models seen (for the filter).
func (c *Console) calls(r *http.Request, account string, f callFilter) ([]call, []string, error) {
	c.be.Settled(r.Context(), account)
	es, err := c.st.Charges(r.Context(), account, maxCallsRead)
	if err != nil {
		return nil, nil, err
	}
	var out []call
	var models []string
	for _, e := range es {
		cl, ok := callOf(e)
		if !ok {
			continue
		}
		if cl.Model != "" && !slices.Contains(models, cl.Model) {
			models = append(models, cl.Model)
		}
		if (f.Key != "" && cl.KeyID != f.Key) || (f.Model != "" && cl.Model != f.Model) || len(out) == maxCallsShown {
			continue
		}
		out = append(out, cl)
	}
	slices.Sort(models)
	return out, models, nil
}

// callsData is the calls page.
type callsData struct {
	Calls  []call
	Keys   []store.Key
	Models []string
	Filter callFilter
	CSV    string // the CSV link with the same filter
}

func (c *Console) callsPage(w http.ResponseWriter, r *http.Request, s *store.Session) error {
	f, err := parseCallFilter(r.URL.Query())
	if err != nil {
		return err
	}
	keys, err := c.st.ListKeys(r.Context(), s.Account)
	if err != nil {
		return err
	}
	if f.Key != "" && !hasKey(keys, f.Key) {
		return errorf(http.StatusNotFound, "key", "There is no such key on this account.")
	}
	calls, models, err := c.calls(r, s.Account, f)
	if err != nil {
		return err
	}
	link := "/console/calls.csv"
	if q := r.URL.Query(); f != (callFilter{}) {
		link += "?" + q.Encode()
	}
	c.render(w, r, http.StatusOK, "calls", page{Title: "Recent calls", Session: s, Nav: "calls",
		Data: callsData{Calls: calls, Keys: keys, Models: models, Filter: f, CSV: link}})
	return nil
}

// csvHeader names the CSV's columns.
var csvHeader = []string{"time", "request_id", "key_id", "model", "route", "endpoint", "status",
	"input_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_1h_tokens", "output_tokens",
	"images", "size_tier", "seconds", "resolution", "requests", "cost_usd", "estimated", "note"}

func (c *Console) callsCSV(w http.ResponseWriter, r *http.Request, s *store.Session) error {
	f, err := parseCallFilter(r.URL.Query())
	if err != nil {
		return err
	}
	if f.Key != "" {
		keys, err := c.st.ListKeys(r.Context(), s.Account)
		if err != nil {
			return err
		}
		if !hasKey(keys, f.Key) {
			return errorf(http.StatusNotFound, "key", "There is no such key on this account.")
		}
	}
	calls, _, err := c.calls(r, s.Account, f)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="calls.csv"`)
	return writeCalls(w, calls)
}

// writeCalls writes calls as CSV; every text cell a caller can influence
// is defused against spreadsheet formula injection.
func writeCalls(w http.ResponseWriter, calls []call) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, cl := range calls {
		u := cl.Usage
		rec := []string{cl.Time.UTC().Format(time.RFC3339Nano), cell(cl.RequestID), cell(cl.KeyID), cell(cl.Model),
			cell(cl.Route), cell(cl.Endpoint), cl.Status, n(u.InputTokens), n(u.CacheReadTokens), n(u.CacheWriteTokens),
			n(u.CacheWrite1hTokens), n(u.OutputTokens), n(u.Images), cell(u.SizeTier), n(u.Seconds), cell(u.Resolution),
			n(u.Requests), cl.Cost.String(), strconv.FormatBool(cl.Estimated), cell(cl.Note)}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// cell defuses a text cell a spreadsheet would read as a formula (one
// beginning =, +, -, @, tab or carriage return): it is prefixed with '
// (OWASP's advice for CSV injection).
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// usageText shows a call's usage in a few words.
func usageText(u pricing.Usage) string {
	var parts []string
	add := func(n int64, what string) {
		if n != 0 {
			parts = append(parts, strconv.FormatInt(n, 10)+" "+what)
		}
	}
	add(u.InputTokens, "in")
	add(u.CacheReadTokens, "cache read")
	add(u.CacheWriteTokens, "cache write")
	add(u.CacheWrite1hTokens, "cache write 1h")
	add(u.OutputTokens, "out")
	add(u.Images, "images")
	add(u.Seconds, "s")
	add(u.Requests, "requests")
	if u.SizeTier != "" {
		parts = append(parts, u.SizeTier)
	}
	if u.Resolution != "" {
		parts = append(parts, u.Resolution)
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, " · ")
}
