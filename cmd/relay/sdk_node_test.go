package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
	d, std := startStandardDemo(t)
	stdKey := std.key

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
