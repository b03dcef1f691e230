package store

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelrelay/modelrelay/pricing"
)

// Reset periods of a key's spend limit. A period begins at 00:00 UTC: each
// day, each Monday, the first of each month. ResetNever counts from the
// key's creation.
const (
	ResetNever   = ""
	ResetDaily   = "daily"
	ResetWeekly  = "weekly"
	ResetMonthly = "monthly"
)

// Which limit refused a hold (InsufficientError.Limit).
const (
	LimitAccount = "account" // the account's available credit
	LimitKey     = "key"     // the key's spend limit for its period
)

// CheckReset validates a reset period.
func CheckReset(reset string) error {
	switch reset {
	case ResetNever, ResetDaily, ResetWeekly, ResetMonthly:
		return nil
	}
	return fmt.Errorf("limit reset %q: want daily, weekly, monthly or none", ClipNote(reset))
}

// PeriodStart is when the period of reset that contains t began (UTC); the
// zero time for ResetNever.
func PeriodStart(reset string, t time.Time) time.Time {
	t = t.UTC()
	y, m, d := t.Date()
	switch reset {
	case ResetDaily:
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	case ResetWeekly:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		return time.Date(y, m, d-back, 0, 0, 0, 0, time.UTC)
	case ResetMonthly:
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Time{}
}

// SpentAt is the key's spend in the period that contains now: Spent, or 0
// once a new period has begun since the ledger last rolled the key's.
func (k Key) SpentAt(now time.Time) pricing.Nano {
	if k.Reset != ResetNever && PeriodStart(k.Reset, now).After(k.PeriodStart) {
		return 0
	}
	return k.Spent
}

// RemainingAt is what the key may still hold at now: its limit minus the
// period's spend and its open holds (never below 0); -1 when it has no
// limit.
func (k Key) RemainingAt(now time.Time) pricing.Nano {
	if k.Limit <= 0 {
		return -1
	}
	return max(0, k.Limit-k.SpentAt(now)-k.Held)
}

// ExpiredAt reports whether the key has an expiry at or before now.
func (k Key) ExpiredAt(now time.Time) bool {
	return !k.Expires.IsZero() && !now.Before(k.Expires)
}

// Allows reports whether a client at addr may use the key: always when it
// has no allow-list, else when a listed network contains addr.
func (k Key) Allows(addr netip.Addr) bool {
	if len(k.Allow) == 0 {
		return true
	}
	addr = addr.Unmap()
	for _, s := range k.Allow {
		if p, err := netip.ParsePrefix(s); err == nil && p.Contains(addr) {
			return true
		}
	}
	return false
}

// CheckAllow validates and canonicalizes an allow-list of networks (CIDR,
// or a bare address meaning only it).
func CheckAllow(allow []string) ([]string, error) {
	if len(allow) > MaxAllow {
		return nil, fmt.Errorf("allow: %d networks, at most %d", len(allow), MaxAllow)
	}
	out := make([]string, 0, len(allow))
	for _, s := range allow {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("allow: %q is not a network (CIDR, e.g. 10.0.0.0/8) or an address", ClipNote(s))
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked().String())
	}
	return out, nil
}

// MaxAllow bounds a key's allow-list.
const MaxAllow = 64

// CheckKeySettings checks a key's settings before a store keeps them, and
// puts them in the form the stores keep: a limit of at least 0, a known
// reset period, a label of at most MaxNoteLen bytes of UTF-8, the expiry in
// UTC, and networks as CheckAllow writes them (nil for none).
func CheckKeySettings(k *Key) error {
	if k.Limit < 0 {
		return fmt.Errorf("store: key %q: limit %d nano-USD is negative", k.ID, k.Limit)
	}
	if err := CheckReset(k.Reset); err != nil {
		return fmt.Errorf("store: key %q: %w", k.ID, err)
	}
	if len(k.Label) > MaxNoteLen || !utf8.ValidString(k.Label) {
		return fmt.Errorf("store: key %q: label: want at most %d bytes of UTF-8", k.ID, MaxNoteLen)
	}
	k.Expires = k.Expires.UTC()
	if len(k.Allow) == 0 {
		k.Allow = nil
		return nil
	}
	allow, err := CheckAllow(k.Allow)
	if err != nil {
		return fmt.Errorf("store: key %q: %w", k.ID, err)
	}
	k.Allow = allow
	return nil
}

// KeyUpdate changes a key's settings; nil fields stay as they are.
type KeyUpdate struct {
	Label   *string
	Limit   *pricing.Nano // 0 removes the limit
	Reset   *string
	Expires *time.Time // the zero time removes the expiry
	Allow   *[]string  // empty removes the allow-list
}

// KeyLimits is the part of Keys that issue 30's limits need.
type KeyLimits interface {
	// UpdateKey changes a key's settings and returns the key; ErrNotFound
	// if there is none. Its spend and holds are kept.
	UpdateKey(ctx context.Context, id string, u KeyUpdate) (Key, error)
}

// Generation is one call as its holder may see it: what it used and cost,
// never its content.
type Generation struct {
	RequestID  string
	Account    string
	KeyID      string
	Model      string
	Route      string
	Endpoint   string
	State      string // an Outcome state
	Usage      pricing.Usage
	HoldAmount pricing.Nano
	Charge     pricing.Nano
	Estimated  bool   // the charge was estimated (the note says why)
	Note       string // the settle's note or the release's reason
	Time       time.Time
}

// Books is what account holders read of their books.
type Books interface {
	// Generation is the call requestID of account; ErrNotFound if it has
	// not ended, never existed or is another account's.
	Generation(ctx context.Context, account, requestID string) (Generation, error)
	// Journal calls fn with the account's entries whose time is in
	// [from, to), in sequence order; ErrNotFound for an unknown account.
	Journal(ctx context.Context, account string, from, to time.Time, fn func(Entry) error) error
	// SetAlert sets the account's low-balance threshold (0: none).
	SetAlert(ctx context.Context, account string, below pricing.Nano) (Account, error)
	// AccountsBelowAlert counts the accounts whose available credit is
	// under their threshold.
	AccountsBelowAlert(ctx context.Context) (int, error)
}

// Estimated reports whether a settle's note says its usage was estimated
// (the gateway's notes begin "estimated: …" when a stream was cut or an
// answer carried no usage).
func Estimated(note string) bool { return strings.HasPrefix(note, "estimated") }
