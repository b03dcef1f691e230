package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/store"
)

// The web console's logins and sessions (store.Console), in one group on
// one store. Times are real (now, to the second): a store may expire a
// session by the clock, so every session here expires in the future.
func (k *kit) console(t *testing.T, s Store) {
	for _, a := range []string{"acme", "globex"} {
		if _, err := s.CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Now().UTC().Truncate(time.Second)
	t.Run("Issue", func(t *testing.T) { consoleIssue(t, s, base) })
	t.Run("SetPassword", func(t *testing.T) { consoleSetPassword(t, s, base) })
	t.Run("SetPasswordRace", func(t *testing.T) { consoleRace(t, s, base, k.opts.Callers) })
	t.Run("Expired", func(t *testing.T) { consoleExpired(t, s, base) })
	t.Run("Sessions", func(t *testing.T) { consoleSessions(t, s, base) })
	t.Run("Purge", func(t *testing.T) { consolePurge(t, s, base) })
	t.Run("ListLogins", func(t *testing.T) { consoleList(t, s) })
	t.Run("Export", func(t *testing.T) { consoleExport(t, claimed[store.Exporter](t, k, s, Exporter), s) })
}

// setup makes a setup token's hash that names what it is for.
func setup(what string) string { return store.HashKey("rls-test-" + what) }

// pw is a password hash as the console writes them (the store keeps it as given).
const pw = "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaA"

func mustIssue(t *testing.T, s Store, email, account, hash string, expires, now time.Time) store.Login {
	t.Helper()
	l, err := s.IssueLogin(ctx, email, account, hash, expires, now)
	if err != nil {
		t.Fatalf("IssueLogin(%q, %q): %v", email, account, err)
	}
	return l
}

func wantLogin(t *testing.T, what string, got, want store.Login) {
	t.Helper()
	if got.Email != want.Email || got.Account != want.Account || got.PasswordHash != want.PasswordHash ||
		got.SetupHash != want.SetupHash || !got.SetupExpires.Equal(want.SetupExpires) ||
		!got.Created.Equal(want.Created) || !got.Updated.Equal(want.Updated) {
		t.Errorf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

// IssueLogin creates a login with its token, keeps it (and its creation)
// when issued again with a new token that replaces the old, and refuses an
// email that is another account's (ErrExists), an unknown account
// (ErrNotFound) and a string that is not an address.
func consoleIssue(t *testing.T, s Store, base time.Time) {
	want := store.Login{Email: "alice@example.com", Account: "acme", SetupHash: setup("alice 1"),
		SetupExpires: base.Add(time.Hour), Created: base, Updated: base}
	wantLogin(t, "IssueLogin", mustIssue(t, s, want.Email, "acme", want.SetupHash, want.SetupExpires, base), want)
	got, err := s.Login(ctx, want.Email)
	if err != nil {
		t.Fatalf("Login: %v", err)
	}
	wantLogin(t, "Login", got, want)

	want.SetupHash, want.SetupExpires, want.Updated = setup("alice 2"), base.Add(2*time.Hour), base.Add(time.Minute)
	wantLogin(t, "IssueLogin again", mustIssue(t, s, want.Email, "acme", want.SetupHash, want.SetupExpires, want.Updated), want)
	if _, err := s.SetPassword(ctx, setup("alice 1"), pw, base.Add(2*time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetPassword with the replaced token: %v, want ErrNotFound", err)
	}
	if got, _ := s.Login(ctx, want.Email); got.PasswordHash != "" {
		t.Errorf("the replaced token set the password: %+v", got)
	}

	if _, err := s.IssueLogin(ctx, want.Email, "globex", setup("alice globex"), base.Add(time.Hour), base); !errors.Is(err, store.ErrExists) {
		t.Errorf("IssueLogin of acme's login for globex: %v, want ErrExists", err)
	}
	if _, err := s.IssueLogin(ctx, "bob@example.com", "nope", setup("bob"), base.Add(time.Hour), base); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("IssueLogin on an unknown account: %v, want ErrNotFound", err)
	}
	if _, err := s.IssueLogin(ctx, "Bob <bob@example.com>", "acme", setup("bob"), base.Add(time.Hour), base); err == nil {
		t.Error("IssueLogin took an address with a display name")
	}
	if _, err := s.Login(ctx, "bob@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Login of no login: %v, want ErrNotFound", err)
	}
	if got, _ := s.Login(ctx, want.Email); got.SetupHash != setup("alice 2") {
		t.Errorf("a refused IssueLogin changed the login: %+v", got)
	}
}

func session(id string, email, account string, base time.Time) store.Session {
	return store.Session{ID: store.HashKey("cookie " + id), Operator: email == "", Email: email, Account: account,
		CSRF: "csrf-" + id, Created: base, Seen: base, Expires: base.Add(12 * time.Hour)}
}

// SetPassword uses a token once (a second use, or the token after the
// password was set, is ErrNotFound), keeps the login's creation, ends the
// login's sessions and no other's, and a later IssueLogin keeps the
// password until its token is used.
func consoleSetPassword(t *testing.T, s Store, base time.Time) {
	mustIssue(t, s, "carol@example.com", "acme", setup("carol"), base.Add(time.Hour), base)
	mustIssue(t, s, "frank@example.com", "acme", setup("frank"), base.Add(time.Hour), base)
	sessions := []store.Session{session("c1", "carol@example.com", "acme", base), session("c2", "carol@example.com", "acme", base),
		session("f1", "frank@example.com", "acme", base), session("op", "", "", base)}
	for _, x := range sessions {
		if err := s.PutSession(ctx, x); err != nil {
			t.Fatalf("PutSession %s: %v", x.CSRF, err)
		}
	}
	at := base.Add(time.Minute)
	got, err := s.SetPassword(ctx, setup("carol"), pw, at)
	if err != nil {
		t.Fatalf("SetPassword: %v", err)
	}
	want := store.Login{Email: "carol@example.com", Account: "acme", PasswordHash: pw, Created: base, Updated: at}
	wantLogin(t, "SetPassword", got, want)
	if got, _ := s.Login(ctx, want.Email); true {
		wantLogin(t, "Login after SetPassword", got, want)
	}
	if _, err := s.SetPassword(ctx, setup("carol"), "other", at); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetPassword with a used token: %v, want ErrNotFound", err)
	}
	for i, x := range sessions {
		_, err := s.Session(ctx, x.ID)
		if ended := i < 2; ended != errors.Is(err, store.ErrNotFound) || (!ended && err != nil) {
			t.Errorf("session %s after carol's SetPassword: %v (want ended: %v)", x.CSRF, err, ended)
		}
	}

	later := base.Add(2 * time.Minute)
	again := mustIssue(t, s, want.Email, "acme", setup("carol 2"), base.Add(time.Hour), later)
	if again.PasswordHash != pw || again.SetupHash != setup("carol 2") {
		t.Errorf("IssueLogin after the password was set: %+v, want the password kept and the new token", again)
	}
	if got, err := s.SetPassword(ctx, setup("carol 2"), pw+"2", later); err != nil || got.PasswordHash != pw+"2" {
		t.Errorf("SetPassword with the new token: %+v, %v", got, err)
	}
}

// Of callers racing to use one token, exactly one sets the password.
func consoleRace(t *testing.T, s Store, base time.Time, callers int) {
	mustIssue(t, s, "gina@example.com", "globex", setup("gina"), base.Add(time.Hour), base)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.SetPassword(ctx, setup("gina"), fmt.Sprintf("%s-%d", pw, i), base.Add(time.Minute))
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, store.ErrNotFound):
				t.Errorf("SetPassword: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Errorf("%d of %d racing uses of one token set the password, want 1", n, callers)
	}
}

// A token is refused from its expiry on (SetupExpires ≤ now), and a bad
// hash is simply not found.
func consoleExpired(t *testing.T, s Store, base time.Time) {
	expires := base.Add(time.Hour)
	mustIssue(t, s, "dave@example.com", "acme", setup("dave"), expires, base)
	for _, now := range []time.Time{expires, expires.Add(time.Second)} {
		if _, err := s.SetPassword(ctx, setup("dave"), pw, now); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("SetPassword at %s, the token expiring at %s: %v, want ErrNotFound", now, expires, err)
		}
	}
	if _, err := s.SetPassword(ctx, "not a hash", pw, base); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetPassword with no hash: %v, want ErrNotFound", err)
	}
	if got, err := s.SetPassword(ctx, setup("dave"), pw, expires.Add(-time.Second)); err != nil || got.PasswordHash != pw {
		t.Errorf("SetPassword a second before expiry: %+v, %v", got, err)
	}
}

// PutSession stores a session once (ErrExists again) and refuses a
// malformed one; Session reads it back; TouchSession moves Seen
// (ErrNotFound for none); DeleteSession ends it, and ending none is no error.
func consoleSessions(t *testing.T, s Store, base time.Time) {
	x := session("s1", "alice@example.com", "acme", base)
	if err := s.PutSession(ctx, x); err != nil {
		t.Fatalf("PutSession: %v", err)
	}
	if err := s.PutSession(ctx, x); !errors.Is(err, store.ErrExists) {
		t.Errorf("PutSession again: %v, want ErrExists", err)
	}
	for name, bad := range map[string]store.Session{
		"operator with a login": {ID: store.HashKey("b1"), Operator: true, Email: "alice@example.com", Account: "acme", CSRF: "c", Expires: x.Expires},
		"login without account": {ID: store.HashKey("b2"), Email: "alice@example.com", CSRF: "c", Expires: x.Expires},
		"no CSRF token":         {ID: store.HashKey("b3"), Operator: true, Expires: x.Expires},
		"no expiry":             {ID: store.HashKey("b4"), Operator: true, CSRF: "c"},
		"id not a hash":         {ID: "cookie", Operator: true, CSRF: "c", Expires: x.Expires},
	} {
		if err := s.PutSession(ctx, bad); err == nil {
			t.Errorf("PutSession took a session with %s", name)
		}
	}
	got, err := s.Session(ctx, x.ID)
	if err != nil || !sameSession(got, x) {
		t.Errorf("Session: %+v, %v; want %+v", got, err, x)
	}
	seen := base.Add(5 * time.Minute)
	if err := s.TouchSession(ctx, x.ID, seen); err != nil {
		t.Fatalf("TouchSession: %v", err)
	}
	x.Seen = seen
	if got, err := s.Session(ctx, x.ID); err != nil || !sameSession(got, x) {
		t.Errorf("Session after TouchSession: %+v, %v; want %+v", got, err, x)
	}
	if err := s.TouchSession(ctx, store.HashKey("none"), seen); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TouchSession of none: %v, want ErrNotFound", err)
	}
	for range 2 {
		if err := s.DeleteSession(ctx, x.ID); err != nil {
			t.Errorf("DeleteSession: %v", err)
		}
	}
	if _, err := s.Session(ctx, x.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Session after DeleteSession: %v, want ErrNotFound", err)
	}
}

func sameSession(a, b store.Session) bool {
	return a.ID == b.ID && a.Operator == b.Operator && a.Email == b.Email && a.Account == b.Account && a.CSRF == b.CSRF &&
		a.Created.Equal(b.Created) && a.Seen.Equal(b.Seen) && a.Expires.Equal(b.Expires)
}

// PurgeSessions deletes the sessions expired at now and those idle since
// idleBefore (both bounds included), counts them, and keeps the rest.
func consolePurge(t *testing.T, s Store, base time.Time) {
	now, idle := base.Add(30*time.Minute), base.Add(-10*time.Minute)
	mk := func(id string, seen, expires time.Time) store.Session {
		x := session(id, "", "", base.Add(-time.Hour))
		x.Seen, x.Expires = seen, expires
		return x
	}
	live := []store.Session{mk("p-live", base, base.Add(time.Hour)), mk("p-live2", idle.Add(time.Second), now.Add(time.Second))}
	doomed := []store.Session{mk("p-expired", base, now), mk("p-idle", idle, base.Add(time.Hour)), mk("p-both", idle, now)}
	for _, x := range append(append([]store.Session{}, live...), doomed...) {
		if err := s.PutSession(ctx, x); err != nil {
			t.Fatalf("PutSession %s: %v", x.CSRF, err)
		}
	}
	n, err := s.PurgeSessions(ctx, now, idle)
	if err != nil || n != len(doomed) {
		t.Errorf("PurgeSessions: %d, %v; want %d", n, err, len(doomed))
	}
	for _, x := range doomed {
		if _, err := s.Session(ctx, x.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("session %s after PurgeSessions: %v, want ErrNotFound", x.CSRF, err)
		}
	}
	for _, x := range live {
		if _, err := s.Session(ctx, x.ID); err != nil {
			t.Errorf("session %s after PurgeSessions: %v, want kept", x.CSRF, err)
		}
	}
	if n, err := s.PurgeSessions(ctx, now, idle); err != nil || n != 0 {
		t.Errorf("PurgeSessions again: %d, %v; want 0", n, err)
	}
}

// ListLogins lists one account's logins, or all, by email, with their
// hashes.
func consoleList(t *testing.T, s Store) {
	base := time.Now().UTC().Truncate(time.Second)
	mustIssue(t, s, "erin@example.com", "globex", setup("erin"), base.Add(time.Hour), base)
	emails := func(account string) string {
		ls, err := s.ListLogins(ctx, account)
		if err != nil {
			t.Fatalf("ListLogins(%q): %v", account, err)
		}
		var out []string
		for _, l := range ls {
			if l.Account != account && account != "" {
				t.Errorf("ListLogins(%q) gave %s of %s", account, l.Email, l.Account)
			}
			if l.PasswordHash == "" && l.SetupHash == "" {
				t.Errorf("ListLogins(%q) gave %s with neither hash", account, l.Email)
			}
			out = append(out, l.Email)
		}
		return fmt.Sprint(out)
	}
	for account, want := range map[string]string{
		"acme":   "[alice@example.com carol@example.com dave@example.com frank@example.com]",
		"globex": "[erin@example.com gina@example.com]",
		"":       "[alice@example.com carol@example.com dave@example.com erin@example.com frank@example.com gina@example.com]",
		"nope":   "[]",
	} {
		if got := emails(account); got != want {
			t.Errorf("ListLogins(%q): %s, want %s", account, got, want)
		}
	}
	ls, _ := s.ListLogins(ctx, "globex")
	if len(ls) == 1 {
		got, _ := s.Login(ctx, "erin@example.com")
		if !reflect.DeepEqual(ls[0].SetupHash, got.SetupHash) || !ls[0].SetupExpires.Equal(got.SetupExpires) {
			t.Errorf("ListLogins gave %+v, Login %+v", ls[0], got)
		}
	}
}

// A store that claims Exporter gives its console logins last, by email
// (bytewise: "al/ice" before "alice"), as Login reads them, hashes and all;
// sessions are not exported.
func consoleExport(t *testing.T, ex store.Exporter, s Store) {
	base := time.Now().UTC().Truncate(time.Second)
	mustIssue(t, s, "al/ice@example.com", "globex", setup("al/ice"), base.Add(time.Hour), base)
	all, err := s.ListLogins(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var x exported
	if err := ex.Export(ctx, &x); err != nil {
		t.Fatalf("Export: %v", err)
	}
	if n := len(x.sections); n < len(all) || !slices.Equal(x.sections[n-len(all):], slices.Repeat([]int{5}, len(all))) {
		t.Fatalf("the logins are not the export's last %d records: sections %v", len(all), x.sections)
	}
	if len(x.logins) != 7 || x.logins[0].Email != "al/ice@example.com" || x.logins[1].Email != "alice@example.com" {
		t.Fatalf("logins exported: %+v", x.logins)
	}
	pending, set := 0, 0
	for _, l := range x.logins {
		got, err := s.Login(ctx, l.Email)
		if err != nil {
			t.Fatal(err)
		}
		wantLogin(t, "login exported", l, got)
		if l.SetupHash != "" {
			pending++
		}
		if l.PasswordHash != "" {
			set++
		}
	}
	if pending == 0 || set == 0 {
		t.Errorf("logins exported without their hashes: %+v", x.logins)
	}
}
