package store

import (
	"strings"
	"testing"
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
