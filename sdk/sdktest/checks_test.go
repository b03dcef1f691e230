package sdktest

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

func TestParams(t *testing.T) {
	tests := []struct {
		name string
		kv   []string
		want []abi.Param
	}{
		{"none", nil, nil},
		{"pairs in order", []string{"n", "2", "size", "1x1"}, []abi.Param{{Name: "n", Value: "2"}, {Name: "size", Value: "1x1"}}},
		{"trailing name dropped", []string{"n", "2", "size"}, []abi.Param{{Name: "n", Value: "2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Params(tt.kv...); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Params(%q) = %+v, want %+v", tt.kv, got, tt.want)
			}
		})
	}
}

func TestIsError(t *testing.T) {
	err := sdk.Invalid("n", "n must be from 1 to 128 (got %q)", "0")
	tests := []struct {
		name string
		err  error
		want abi.Error
		is   bool
	}{
		{"exact", err, abi.Error{Code: abi.CodeInvalid, Field: "n", Message: `n must be from 1 to 128 (got "0")`}, true},
		{"substring", err, abi.Error{Code: abi.CodeInvalid, Field: "n", Message: "from 1 to 128"}, true},
		{"wrapped", wrap{err}, abi.Error{Code: abi.CodeInvalid, Field: "n"}, true},
		{"other code", err, abi.Error{Code: abi.CodeInternal, Field: "n"}, false},
		{"other field", err, abi.Error{Code: abi.CodeInvalid, Field: "size"}, false},
		{"other message", err, abi.Error{Code: abi.CodeInvalid, Field: "n", Message: "from 1 to 129"}, false},
		{"nil", nil, abi.Error{Code: abi.CodeInvalid}, false},
		{"not an abi.Error", os.ErrNotExist, abi.Error{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsError(tt.err, tt.want); got != tt.is {
				t.Fatalf("IsError(%v, %+v) = %v", tt.err, tt.want, got)
			}
		})
	}
}

type wrap struct{ err error }

func (w wrap) Error() string { return "wrapped: " + w.err.Error() }
func (w wrap) Unwrap() error { return w.err }

func TestCheckEmbedded(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.WriteFile("demo.json", []byte(demoPrices), 0o644); err != nil {
		t.Fatal(err)
	}
	CheckEmbedded(t, "demo", []byte(demoPrices))
}

// The hand-checked numbers of testdata/good (see demoPrices).
var goodHand = []Hand{
	{File: "chat", Usage: &abi.Usage{InputTokens: 900, OutputTokens: 50}, Hold: 2_500_000, Charge: 2_050_000},
}

func TestCheckHand(t *testing.T) { CheckHand(t, "testdata/good", goodHand) }

// demoTable is a README table of demoPrices with a model cell, and
// demoReadme the README it renders to.
var demoTable = PriceTable{
	Plugin: "demo",
	Header: "| Model | Endpoints | Max output | Route | Input | Output |\n|---|---|---:|---|---:|---:|\n",
	Routes: []string{"standard", "economy"},
	ModelCells: func(m pricing.Model) []string {
		return []string{strconv.FormatInt(m.MaxOutput, 10)}
	},
	PriceCells: func(p pricing.Price) []string { return []string{"$" + p.Input.String(), "$" + p.Output.String()} },
}

const demoReadme = "# demo\n\n<!-- prices:begin (generated from demo.json by TestReadmePrices; RELAY_UPDATE=1 rewrites it) -->\n" +
	"| Model | Endpoints | Max output | Route | Input | Output |\n|---|---|---:|---|---:|---:|\n" +
	"| demo-1 | chat_completions | 8192 | standard (auto) | $2 | $5 |\n" +
	"| demo-1 | | | reference (Vendor) | $3 | $6 |\n" +
	"<!-- prices:end -->\n\nMore text.\n"

func demoModels(t *testing.T) []pricing.Model {
	t.Helper()
	models, err := pricing.ParseModels([]byte(`{"models":[{"id":"demo-1","endpoints":["chat_completions"],"max_output":8192,
 "auto_route":"standard",
 "routes":{"standard":{"unit":"per_million_tokens","input":"2","output":"5"}},
 "reference_price":{"unit":"per_million_tokens","input":"3","output":"6"},
 "reference_price_source":{"kind":"list_price","name":"Vendor","url":"https://example.test","verified_at":"2026-09-19","model":"demo"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return models
}

func TestCheckReadme(t *testing.T) {
	models := demoModels(t)
	t.Chdir(t.TempDir())
	if err := os.WriteFile("README.md", []byte(demoReadme), 0o644); err != nil {
		t.Fatal(err)
	}
	CheckReadme(t, demoTable, models)

	// Update mode rewrites a stale table and keeps the text around it.
	stale := strings.Replace(demoReadme, "$5", "$4", 1)
	if err := os.WriteFile("README.md", []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RELAY_UPDATE", "1")
	CheckReadme(t, demoTable, models)
	got, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != demoReadme {
		t.Fatalf("updated README:\n%s\nwant:\n%s", got, demoReadme)
	}
}

// CheckHand, CheckReadme and CheckEmbedded must fail on a wrong number, a
// fixture without a row, a stale table, missing markers, an unlisted route
// and an embedded list that is not NAME.json. Each failing
// run happens in a child process (this test binary, re-run on one helper
// test), whose exit status and output are checked.
func TestChecksFail(t *testing.T) {
	if h := os.Getenv("SDKTEST_HELPER"); strings.HasPrefix(h, "checks-") {
		failingCheck(t, strings.TrimPrefix(h, "checks-"))
		return
	}
	tests := []struct {
		helper string
		want   []string
	}{
		{"hand-wrong", []string{"expect.charge 2050000, hand-checked 2050001", "usage &{InputTokens:900"}},
		{"hand-unlisted", []string{"chat: a priced fixture without a hand-checked row here", "nope", "fixture missing"}},
		{"readme-stale", []string{"README.md's price table is not demo.json's; run with RELAY_UPDATE=1"}},
		{"readme-markers", []string{"README.md lacks the markers"}},
		{"readme-route", []string{`demo-1: route "premium" is not in the README table`}},
		{"embedded-differs", []string{"the embedded price list differs from demo.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.helper, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestChecksFail$", "-test.v")
			cmd.Env = append(os.Environ(), "SDKTEST_HELPER=checks-"+tt.helper, "RELAY_UPDATE=")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the check passed:\n%s", out)
			}
			for _, want := range tt.want {
				if !strings.Contains(string(out), want) {
					t.Fatalf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

func failingCheck(t *testing.T, helper string) {
	models := demoModels(t)
	readme := demoReadme
	switch helper {
	case "hand-wrong":
		CheckHand(t, "testdata/good", []Hand{{File: "chat", Usage: &abi.Usage{InputTokens: 901}, Hold: 2_500_000, Charge: 2_050_001}})
		return
	case "hand-unlisted":
		CheckHand(t, "testdata/good", []Hand{{File: "nope"}})
		return
	case "readme-stale":
		readme = strings.Replace(readme, "$5", "$4", 1)
	case "readme-markers":
		readme = strings.Replace(readme, ReadmeEnd, "", 1)
	case "readme-route":
		models[0].Routes["premium"] = models[0].Routes["standard"]
	case "embedded-differs":
		t.Chdir(t.TempDir())
		if err := os.WriteFile("demo.json", []byte(demoPrices), 0o644); err != nil {
			t.Fatal(err)
		}
		CheckEmbedded(t, "demo", []byte(demoPrices+" "))
		return
	default:
		t.Fatalf("unknown helper %q", helper)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	CheckReadme(t, demoTable, models)
}
