package console

import (
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelrelay/modelrelay/pricing"
)

// Bounds on form fields, checked before anything else reads them.
const (
	maxField = 4096 // bytes of any one text field
	maxList  = 64   // entries of a comma- or space-separated list
)

// keyForm is the create-key form, read.
type keyForm struct {
	Route    string
	Exclude  []string
	Settings KeySettings
}

// parseKeyForm reads the create-key form: label, route, limit (USD),
// reset (never, daily, weekly, monthly), expires (a date, meaning the end
// of that UTC day, or RFC 3339), allow and exclude (lists separated by
// commas or spaces). The Backend checks the values with the admin API's
// rules; this checks only their shape.
func parseKeyForm(f url.Values) (keyForm, error) {
	var k keyForm
	for _, name := range []string{"label", "route", "limit", "reset", "expires", "allow", "exclude"} {
		if v := f.Get(name); len(v) > maxField || !utf8.ValidString(v) {
			return k, errorf(http.StatusBadRequest, name, name+": at most 4096 bytes of UTF-8 text")
		}
	}
	k.Route = strings.TrimSpace(f.Get("route"))
	if k.Route == "" {
		return k, errorf(http.StatusBadRequest, "route", "route: choose a route")
	}
	if l := f.Get("label"); l != "" {
		k.Settings.Label = &l
	}
	s, err := parseLimitFields(f)
	if err != nil {
		return k, err
	}
	k.Settings.Limit, k.Settings.Reset = s.Limit, s.Reset
	if e := strings.TrimSpace(f.Get("expires")); e != "" {
		if d, err := time.Parse("2006-01-02", e); err == nil {
			e = d.AddDate(0, 0, 1).Format(time.RFC3339)
		}
		k.Settings.Expires = &e
	}
	allow, err := splitList("allow", f.Get("allow"))
	if err != nil {
		return k, err
	}
	if len(allow) > 0 {
		k.Settings.Allow = &allow
	}
	if k.Exclude, err = splitList("exclude", f.Get("exclude")); err != nil {
		return k, err
	}
	return k, nil
}

// parseLimitFields reads limit and reset; absent or empty fields are nil.
// "never" is the form's word for a limit that never resets.
func parseLimitFields(f url.Values) (KeySettings, error) {
	var s KeySettings
	if l := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(f.Get("limit")), "$")); l != "" {
		if _, err := pricing.ParseUSD(l); err != nil {
			return s, errorf(http.StatusBadRequest, "limit", "limit: "+quote(l)+" is not an amount in USD such as 5 or 0.10 (0 for no limit)")
		}
		s.Limit = &l
	}
	switch r := f.Get("reset"); r {
	case "":
	case "never", "none":
		n := "none"
		s.Reset = &n
	case "daily", "weekly", "monthly":
		s.Reset = &r
	default:
		return s, errorf(http.StatusBadRequest, "reset", "reset: choose never, daily, weekly or monthly")
	}
	return s, nil
}

// splitList splits a comma- or space-separated list.
func splitList(field, v string) ([]string, error) {
	list := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
	if len(list) > maxList {
		return nil, errorf(http.StatusBadRequest, field, field+": at most 64 entries")
	}
	return list, nil
}

// quote shows caller text in a message: bounded and quoted.
func quote(s string) string {
	if len(s) > 64 {
		i := 64
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + "…"
	}
	return `"` + strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, s) + `"`
}
