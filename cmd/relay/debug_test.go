package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/sim"
)

// get returns the status and body of a GET of url.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// appendConfig adds lines to the config file at path.
func appendConfig(t *testing.T, path, lines string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(lines); err != nil {
		t.Fatal(err)
	}
}

// relay serve with debug_listen: the profiler answers on that address,
// and neither it nor anything of the gateway's is on the other listener.
func TestServeDebugListen(t *testing.T) {
	s := httptest.NewServer(sim.New(sim.Options{}))
	defer s.Close()
	dir := t.TempDir()
	addr, debugAddr := freeAddr(t), freeAddr(t)
	config := writeConfig(t, dir, addr, s.URL)
	appendConfig(t, config, "debug_listen: "+debugAddr+"\n")
	g := startGateway(t, config, addr)

	profiles := []struct{ path, want string }{
		{"/debug/pprof/", "Types of profiles available"},
		{"/debug/pprof/heap?debug=1", "heap profile"},
		{"/debug/pprof/goroutine?debug=1", "goroutine profile"},
		{"/debug/pprof/cmdline", "serve"},
	}
	for _, p := range profiles {
		if code, body := get(t, "http://"+debugAddr+p.path); code != http.StatusOK || !strings.Contains(body, p.want) {
			t.Errorf("debug_listen %s: HTTP %d, body lacks %q", p.path, code, p.want)
		}
		if code, body := get(t, "http://"+addr+p.path); code != http.StatusNotFound || strings.Contains(body, p.want) {
			t.Errorf("the gateway's listener serves %s: HTTP %d", p.path, code)
		}
	}
	for _, path := range []string{"/healthz", "/v1/models", "/metrics"} {
		if code, _ := get(t, "http://"+debugAddr+path); code != http.StatusNotFound {
			t.Errorf("debug_listen serves the gateway's %s: HTTP %d", path, code)
		}
	}
	if !g.outputHas(`"msg":"profiler listening"`) {
		t.Errorf("relay serve does not say where the profiler listens:\n%s", g.output())
	}
}

// relay serve refuses a debug_listen equal to listen or metrics_listen
// before it opens anything.
func TestServeDebugListenRefusesSharedAddress(t *testing.T) {
	cases := []struct{ name, extra, want string }{
		{"listen", "debug_listen: %[1]s\n", "the gateway's listen address"},
		{"metrics_listen", "metrics_listen: %[2]s\ndebug_listen: %[2]s\n", "is metrics_listen"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			addr, other := freeAddr(t), freeAddr(t)
			config := writeConfig(t, dir, addr, "http://127.0.0.1:1")
			appendConfig(t, config, strings.NewReplacer("%[1]s", addr, "%[2]s", other).Replace(c.extra))
			out, err := exec.Command(relayBin, "serve", "-config", config).CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Fatalf("relay serve = %v, want an error saying %q:\n%s", err, c.want, out)
			}
		})
	}
}

func TestCheckDebugListen(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                         string
		listen, metrics, debug, want string
	}{
		{"off", "127.0.0.1:8080", "", "", ""},
		{"own address", "127.0.0.1:8080", "127.0.0.1:9100", "127.0.0.1:6060", ""},
		{"metrics off", "127.0.0.1:8080", "", "127.0.0.1:6060", ""},
		{"listen", "127.0.0.1:8080", "", "127.0.0.1:8080", "listen address"},
		{"metrics", "127.0.0.1:8080", "127.0.0.1:9100", "127.0.0.1:9100", "metrics_listen"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkDebugListen(config.Config{Listen: c.listen, MetricsListen: c.metrics, DebugListen: c.debug})
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("checkDebugListen = %v, want %q", err, c.want)
			}
		})
	}
}
