package main

import (
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		server string
		pos    []string
	}{
		{[]string{"sk-abc", "-server", "http://h:1"}, "http://h:1", []string{"sk-abc"}},
		{[]string{"-server", "http://h:1", "sk-abc"}, "http://h:1", []string{"sk-abc"}},
		{[]string{"a", "-server=http://h:2", "b"}, "http://h:2", []string{"a", "b"}},
		{[]string{"--", "-server", "x"}, "default", []string{"-server", "x"}},
		{[]string{"a", "--", "-b"}, "default", []string{"a", "-b"}},
		{nil, "default", nil},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		server := fs.String("server", "default", "")
		pos, err := parseInterleaved(fs, tc.args)
		if err != nil || *server != tc.server || !slices.Equal(pos, tc.pos) {
			t.Errorf("%q: server %q pos %q (%v), want %q %q", tc.args, *server, pos, err, tc.server, tc.pos)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := parseInterleaved(fs, []string{"a", "-nope"}); err == nil {
		t.Error("an unknown flag after a positional argument was accepted")
	}
}

// TestKeysRevokeFlagsAnywhere: relay keys revoke KEY -server URL reaches
// the server at URL, as relay keys revoke -server URL KEY does; a stray
// argument to a subcommand that takes none is an error.
func TestKeysRevokeFlagsAnywhere(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in map[string]string
		_ = json.NewDecoder(r.Body).Decode(&in)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+in["key"]+in["id"])
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"key_abc","account":"acme","route":"auto","exclude":[],"revoked":true,"created":"2026-01-01T00:00:00Z"}`)
	}))
	defer srv.Close()
	t.Setenv("RELAY_ADMIN_TOKEN", "admin-token-for-tests")
	for _, args := range [][]string{
		{"revoke", "sk-secret", "-server", srv.URL},
		{"revoke", "-server", srv.URL, "key_abc"},
	} {
		if err := runKeys(args); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
	}
	want := []string{"POST /admin/keys/revoke sk-secret", "POST /admin/keys/revoke key_abc"}
	if !slices.Equal(got, want) {
		t.Fatalf("requests %q, want %q", got, want)
	}
	if err := runKeys([]string{"list", "acme", "-server", srv.URL}); err == nil || !strings.Contains(err.Error(), `unexpected argument "acme"`) {
		t.Fatalf("keys list acme: %v", err)
	}
	if err := runKeys([]string{"revoke", "a", "b", "-server", srv.URL}); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Fatalf("two keys: %v", err)
	}
}
