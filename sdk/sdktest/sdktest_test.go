package sdktest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/fixture"
)

// demo-1 costs $2 per million input tokens and $5 per million output tokens
// (2e9 and 5e9 nano-USD), with at most 8192 output tokens. The fixtures in
// testdata/good were computed by hand from it:
//
//	chat.json hold   = (1000 × 2e9 + 100 × 5e9) / 1e6 = 2_500_000
//	chat.json charge = ( 900 × 2e9 +  50 × 5e9) / 1e6 = 2_050_000
//	too-many-tokens.json: max_output_tokens 8193 > 8192 → 400 max_tokens
//
// testdata/bad/chat.json expects a hold one nano-USD too high.
const demoPrices = `{"models":[{"id":"demo-1","endpoints":["chat_completions"],"max_output":8192,
 "routes":{"standard":{"unit":"per_million_tokens","input":"2","output":"5"}}}]}`

func init() {
	sdk.Register(sdk.TokenPlugin("demo", []byte(demoPrices)))
}

func TestRunGood(t *testing.T) {
	Run(t, "testdata/good")
}

func TestSetup(t *testing.T) {
	d := Setup(t)
	if d.Name != "demo" || len(d.Models) != 1 || d.Models[0].ID != "demo-1" {
		t.Fatalf("Setup = %+v", d)
	}
}

// A fixture that does not match must fail the test. The failing run happens
// in a child process (this test binary, re-run on one helper test), whose
// exit status and output are checked.
func TestRunBadFails(t *testing.T) {
	if os.Getenv("SDKTEST_HELPER") == "bad" {
		Run(t, "testdata/bad")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunBadFails$", "-test.v")
	cmd.Env = append(os.Environ(), "SDKTEST_HELPER=bad", "RELAY_UPDATE=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("a fixture with a wrong hold passed:\n%s", out)
	}
	for _, want := range []string{"--- FAIL: TestRunBadFails/chat", "admit: hold = 2500000, want 2500001"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

// Update mode rewrites a fixture's expectations and usage from the plugin.
func TestRunUpdate(t *testing.T) {
	if os.Getenv("SDKTEST_HELPER") == "update" {
		Run(t, os.Getenv("SDKTEST_DIR"))
		return
	}
	dir := t.TempDir()
	data, err := os.ReadFile("testdata/bad/chat.json")
	if err != nil {
		t.Fatal(err)
	}
	// Drop the usage too: update must fill it from the upstream body.
	f, err := fixture.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	f.Usage = nil
	f.Path = filepath.Join(dir, "chat.json")
	if err := f.Save(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunUpdate$")
	cmd.Env = append(os.Environ(), "SDKTEST_HELPER=update", "SDKTEST_DIR="+dir, "RELAY_UPDATE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("update run failed: %v\n%s", err, out)
	}
	got, err := fixture.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := got[0]
	if g.Expect.Hold == nil || *g.Expect.Hold != 2_500_000 || g.Expect.Charge == nil || *g.Expect.Charge != 2_050_000 {
		t.Fatalf("updated expect = %+v", g.Expect)
	}
	if g.Usage == nil || g.Usage.InputTokens != 900 || g.Usage.OutputTokens != 50 {
		t.Fatalf("updated usage = %+v", g.Usage)
	}
	if r := g.Check(Caller()); !r.OK() {
		t.Fatalf("updated fixture fails: %v", r.Err())
	}
}

func TestUpdating(t *testing.T) {
	t.Setenv("RELAY_UPDATE", "1")
	if !Updating() {
		t.Fatal("RELAY_UPDATE=1 is not update mode")
	}
	t.Setenv("RELAY_UPDATE", "")
	if Updating() {
		t.Fatal("update mode without flag or env")
	}
}
