package admin

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// A key's own settings (store.Key: label, spend limit and its reset period,
// expiry, allow-list) as the admin API reads and writes them. The ledger
// enforces the limit in Hold (the key's open holds count against it as the
// account's count against its credit); the gateway turns a refusal into its
// 402 and checks expiry and the allow-list in authenticate.

// resetName is a reset period as the admin API shows it: "none" for a
// limit that never resets.
func resetName(reset string) string {
	if reset == store.ResetNever {
		return "none"
	}
	return reset
}

// maxLabel bounds a key's label, in bytes.
const maxLabel = 200

// keySettings are the settings a key create or update may carry; an
// absent field is left as it is. JSON null clears a setting, as do label
// "", limit_usd 0, expires "none" and allow []. Each is read raw and
// checked here, so that every error names its field.
type keySettings struct {
	Label      json.RawMessage `json:"label"`
	LimitUSD   json.RawMessage `json:"limit_usd"`   // decimal text or a number, read as decimal text
	LimitReset json.RawMessage `json:"limit_reset"` // daily, weekly, monthly or none
	Expires    json.RawMessage `json:"expires"`     // RFC 3339, or "none"
	Allow      json.RawMessage `json:"allow"`       // CIDRs or addresses
}

// update checks the settings and returns them as a store.KeyUpdate;
// errors are 400s naming the field.
func (s keySettings) update(now time.Time) (store.KeyUpdate, error) {
	var u store.KeyUpdate
	if s.Label != nil {
		var l string
		if string(s.Label) != "null" {
			if json.Unmarshal(s.Label, &l) != nil || len(l) > maxLabel || !utf8.ValidString(l) || strings.ContainsFunc(l, isControl) {
				return u, apierr.BadRequest("label", "label must be a string of at most %d bytes of UTF-8 text without control characters", maxLabel)
			}
		}
		u.Label = &l
	}
	if s.LimitUSD != nil {
		n, err := parseUSDField("limit_usd", s.LimitUSD)
		if err != nil {
			return u, err
		}
		u.Limit = &n
	}
	if s.LimitReset != nil {
		var r string
		if string(s.LimitReset) != "null" {
			if json.Unmarshal(s.LimitReset, &r) != nil {
				return u, apierr.BadRequest("limit_reset", "limit_reset must be a string: daily, weekly, monthly or none")
			}
			if store.CheckReset(r) != nil && r != "none" {
				return u, apierr.BadRequest("limit_reset", "limit_reset %s: want daily, weekly, monthly or none", apierr.Quote(r))
			}
		}
		if r == "none" {
			r = store.ResetNever
		}
		u.Reset = &r
	}
	if s.Expires != nil {
		t, err := parseExpires(s.Expires, now)
		if err != nil {
			return u, err
		}
		u.Expires = &t
	}
	if s.Allow != nil {
		a, err := parseAllow(s.Allow)
		if err != nil {
			return u, err
		}
		u.Allow = &a
	}
	return u, nil
}

func isControl(r rune) bool { return r < ' ' || r == 0x7f }

// parseUSDField reads a field of decimal USD: a JSON string or number
// holding exact decimal text, never read through a float; null is 0.
func parseUSDField(field string, raw json.RawMessage) (pricing.Nano, error) {
	text := string(raw)
	switch {
	case text == "null":
		return 0, nil
	case strings.HasPrefix(text, `"`):
		if err := json.Unmarshal(raw, &text); err != nil {
			return 0, apierr.BadRequest(field, "%s must be decimal USD such as \"5\" or \"0.10\"", field)
		}
	}
	n, err := pricing.ParseUSD(text)
	if err != nil {
		return 0, apierr.BadRequest(field, "%s: %s (want decimal USD such as \"5\" or \"0.10\"; 0 for none)", field, apierr.Bound(err.Error(), apierr.MaxMessage))
	}
	return n, nil
}

// parseExpires reads expires: RFC 3339 text after now, or "none" or null
// for no expiry (the zero time).
func parseExpires(raw json.RawMessage, now time.Time) (time.Time, error) {
	if string(raw) == "null" {
		return time.Time{}, nil
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		return time.Time{}, apierr.BadRequest("expires", "expires must be an RFC 3339 time such as \"2026-12-31T00:00:00Z\", or \"none\"")
	}
	if text == "none" || text == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, text)
	if err != nil {
		return time.Time{}, apierr.BadRequest("expires", "expires %s is not an RFC 3339 time such as \"2026-12-31T00:00:00Z\"", apierr.Quote(text))
	}
	if !t.After(now) {
		return time.Time{}, apierr.BadRequest("expires", "expires %s is not in the future (to stop a key now, revoke it)", apierr.Quote(text))
	}
	return t.UTC(), nil
}

// parseAllow reads allow: a list of networks, checked and canonicalized by
// store.CheckAllow; [] or null for any address.
func parseAllow(raw json.RawMessage) ([]string, error) {
	var list []string
	if string(raw) != "null" {
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, apierr.BadRequest("allow", "allow must be a list of networks, e.g. [\"10.0.0.0/8\", \"203.0.113.7\"]")
		}
	}
	out, err := store.CheckAllow(list)
	if err != nil {
		return nil, apierr.BadRequest("allow", "%s", apierr.Bound(err.Error(), apierr.MaxMessage))
	}
	return out, nil
}

// applyUpdate sets u's fields on k (a key being created).
func applyUpdate(k *store.Key, u store.KeyUpdate) {
	if u.Label != nil {
		k.Label = *u.Label
	}
	if u.Limit != nil {
		k.Limit = *u.Limit
	}
	if u.Reset != nil {
		k.Reset = *u.Reset
	}
	if u.Expires != nil {
		k.Expires = *u.Expires
	}
	if u.Allow != nil && len(*u.Allow) > 0 {
		k.Allow = *u.Allow
	}
}
