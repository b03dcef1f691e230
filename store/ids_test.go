package store

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// CheckHold and CheckJob refuse what both stores refuse, with the error
// both return: an id that is not one, an account id with '/', a negative
// amount.
func TestCheckHoldAndJob(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hold    Hold
		wantErr string // "" for none
	}{
		{"good", Hold{RequestID: "req_1", Account: "acme", Amount: 5}, ""},
		{"zero amount", Hold{RequestID: "req_1", Account: "acme"}, ""},
		{"no request id", Hold{Account: "acme"}, "store: request id is empty"},
		{"account with a slash", Hold{RequestID: "req_1", Account: "a/b"}, "store: account id \"a/b\" contains '/'"},
		{"negative amount", Hold{RequestID: "req_1", Account: "acme", Amount: -1}, "store: hold \"req_1\": amount -1 nano-USD is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, "CheckHold", CheckHold(tc.hold), tc.wantErr)
			j := Job{RequestID: tc.hold.RequestID, Account: tc.hold.Account, Amount: tc.hold.Amount}
			want := strings.Replace(strings.Replace(tc.wantErr, "store: request", "store: job request", 1), "store: hold", "store: job", 1)
			checkErr(t, "CheckJob", CheckJob(j), want)
		})
	}
}

func checkErr(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v, want no error", what, err)
	case want != "" && (err == nil || err.Error() != want):
		t.Errorf("%s: %v, want %q", what, err, want)
	}
}

// CheckSettlement refuses an id that is not one and a negative charge, as
// both stores do.
func TestCheckSettlement(t *testing.T) {
	checkErr(t, "good", CheckSettlement(Settlement{RequestID: "req_1", Charge: 5}), "")
	checkErr(t, "no request id", CheckSettlement(Settlement{}), "store: request id is empty")
	checkErr(t, "negative charge", CheckSettlement(Settlement{RequestID: "req_1", Charge: -1}),
		"store: settle \"req_1\": charge -1 nano-USD is negative")
}

// CheckKeySettings refuses a negative limit, an unknown reset and a long
// label, and keeps the allow-list canonical (nil for none) and the expiry
// in UTC.
func TestCheckKeySettings(t *testing.T) {
	k := Key{ID: "key_1", Reset: ResetDaily, Label: "ci", Allow: []string{"10.1.2.3/8", "::ffff:1.2.3.4"},
		Expires: time.Date(2027, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600))}
	if err := CheckKeySettings(&k); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(k.Allow, []string{"10.0.0.0/8", "1.2.3.4/32"}) || k.Expires.Location() != time.UTC {
		t.Errorf("settings kept as %v, %v", k.Allow, k.Expires)
	}
	empty := Key{ID: "key_2", Allow: []string{}}
	if err := CheckKeySettings(&empty); err != nil || empty.Allow != nil {
		t.Errorf("an empty allow-list: %v, %#v", err, empty.Allow)
	}
	for _, tc := range []struct {
		name string
		k    Key
		want string
	}{
		{"negative limit", Key{ID: "k", Limit: -1}, "store: key \"k\": limit -1 nano-USD is negative"},
		{"unknown reset", Key{ID: "k", Reset: "hourly"}, "store: key \"k\": limit reset \"hourly\": want daily, weekly, monthly or none"},
		{"long label", Key{ID: "k", Label: strings.Repeat("x", MaxNoteLen+1)}, "store: key \"k\": label: want at most 1024 bytes of UTF-8"},
		{"bad network", Key{ID: "k", Allow: []string{"nowhere"}}, "store: key \"k\": allow: \"nowhere\" is not a network (CIDR, e.g. 10.0.0.0/8) or an address"},
	} {
		checkErr(t, tc.name, CheckKeySettings(&tc.k), tc.want)
	}
}
