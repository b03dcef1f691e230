package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestNodeSDKs runs clients/sdk-stream.mjs, the official npm SDKs (openai's
// chat.completions.stream and responses.stream, @anthropic-ai/sdk's
// messages.stream, pinned in clients/package.json) streaming a tool loop
// through translation, against relay demo with its standard key; it fails
// with the script's output when the script does, and wants each turn
// charged to the demo account. make test-clients installs the SDKs and
// sets RELAY_TEST_CLIENTS=1.
func TestNodeSDKs(t *testing.T) {
	if os.Getenv(clientsEnv) == "" {
		t.Skipf("the npm SDK test runs under make test-clients (%s=1; needs node and npm)", clientsEnv)
	}
	root, _ := filepath.Abs("../..")
	clients := filepath.Join(root, "clients")
	for _, p := range []string{"openai", "@anthropic-ai/sdk"} {
		if _, err := os.Stat(filepath.Join(clients, "node_modules", p, "package.json")); err != nil {
			t.Fatalf("%s not installed: run npm ci --prefix clients (make test-clients does): %v", p, err)
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	d, stdKey := startStandardDemo(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(clients, "sdk-stream.mjs"), "http://"+d.addr, stdKey)
	cmd.Dir = clients
	cmd.Env = newHome(t, "").env
	out, err := cmd.CombinedOutput()
	t.Logf("node sdk-stream.mjs:\n%s", out)
	if err != nil || !bytes.Contains(out, []byte("all cases passed")) {
		t.Fatalf("node sdk-stream.mjs failed: %v\n%s", err, out)
	}
	// Each loop is two calls, one case with one call and one with two in
	// parallel: four calls per API and model.
	want := map[string]int{"modela-opus-5-5": 8, "modelf-flash": 12, "modele-k3": 8, "modelb-6-astra": 4}
	for model, n := range want {
		if got := d.charges(t, model); got != n {
			t.Errorf("%s: %d charges on account demo, want %d", model, got, n)
		}
	}
}

// startStandardDemo starts relay demo on a fresh data directory, as
// startDemo does, and returns it with the standard key it prints; the demo
// stops when the test ends.
func startStandardDemo(t *testing.T) (*demo, string) {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	cmd := exec.Command(relayBin, "demo", "-addr", addr, "-data", filepath.Join(dir, "data"), "-plugins", pluginDir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := syncBuffer{&sync.Mutex{}, &bytes.Buffer{}}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	d := &demo{addr: addr}
	var stdKey string
	timer := time.AfterFunc(120*time.Second, func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(stdout)
	for (stdKey == "" || d.token == "" || d.curl == "") && sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "standard key: "):
			stdKey = strings.TrimPrefix(l, "standard key: ")
		case strings.HasPrefix(l, "admin token: "):
			d.token = strings.TrimPrefix(l, "admin token: ")
		case strings.HasPrefix(l, "curl "):
			d.curl = l
		}
	}
	timer.Stop()
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if !strings.HasPrefix(stdKey, "sk-") || d.token == "" || d.curl == "" {
		stderr.mu.Lock()
		defer stderr.mu.Unlock()
		t.Fatalf("demo output: standard key %q token %q curl %q; stderr %s", stdKey, d.token, d.curl, stderr.b.String())
	}
	return d, stdKey
}
