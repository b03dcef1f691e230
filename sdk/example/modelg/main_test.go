package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/sdktest"
)

// testdata/chat.json by hand: hold 2000 × 0.50 + 500 × 1.50 = 1000 + 750 µ$
// = 1_750_000 nano-USD; charge 776 × 0.50 + 1024 × 0.05 + 120 × 1.50 =
// 388 + 51.2 + 180 = 619.2 µ$ = 619_200 nano-USD.
func TestFixtures(t *testing.T) { sdktest.Run(t, "testdata") }

const readme = "../../../plugins/README.md"

// The plugin shown in plugins/README.md is this file, verbatim, and it is
// under 30 lines.
func TestReadmeShowsThisPlugin(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(src, []byte("\n")); n >= 30 {
		t.Fatalf("the example plugin has %d lines, want under 30", n)
	}
	doc, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	const open = "<!-- example: sdk/example/modelg/main.go -->\n```go\n"
	i := bytes.Index(doc, []byte(open))
	if i < 0 {
		t.Fatalf("%s lacks %q", readme, open)
	}
	block := doc[i+len(open):]
	block = block[:bytes.Index(block, []byte("```\n"))]
	if !bytes.Equal(block, src) {
		t.Fatalf("the README's code block differs from main.go:\n%s", block)
	}
}

// The example builds as a wasm plugin exactly as the README says.
func TestBuildsForWasm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a wasm module")
	}
	out := filepath.Join(t.TempDir(), "modelg.wasm")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-buildmode=c-shared", "-o", out, ".")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	wasm, err := os.ReadFile(out)
	if err != nil || !strings.HasPrefix(string(wasm), "\x00asm") {
		t.Fatalf("not a wasm module: %v", err)
	}
}
