package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProfilerServesPprof(t *testing.T) {
	srv := httptest.NewServer(profiler())
	defer srv.Close()
	cases := []struct {
		name, path, want string
	}{
		{"index", "/debug/pprof/", "Types of profiles available"},
		{"heap", "/debug/pprof/heap?debug=1", "heap profile"},
		{"goroutine", "/debug/pprof/goroutine?debug=1", "goroutine profile"},
		{"cmdline", "/debug/pprof/cmdline", "relayprof"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := http.Get(srv.URL + c.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), c.want) {
				t.Fatalf("%s: HTTP %d, body lacks %q", c.path, resp.StatusCode, c.want)
			}
		})
	}
	resp, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the profiler serves %d on a gateway path", resp.StatusCode)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "relay.yaml")
	if err := os.WriteFile(bad, []byte("listen: 127.0.0.1:0\nnonesuch: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"log level", []string{"-log-level", "loud"}, "-log-level"},
		{"missing config", []string{"-config", filepath.Join(t.TempDir(), "none.yaml")}, "config"},
		{"unknown key", []string{"-config", bad}, "nonesuch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := run(c.args)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run(%q) = %v, want an error naming %q", c.args, err, c.want)
			}
		})
	}
}
