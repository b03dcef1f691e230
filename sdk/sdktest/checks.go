package sdktest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/fixture"
)

// Params returns the params name1=value1, name2=value2, … of kv, in order
// (nil when kv is empty); a trailing name without a value is dropped.
func Params(kv ...string) []abi.Param {
	var out []abi.Param
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, abi.Param{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// IsError reports whether err is an *abi.Error with want's Code and Field
// and a Message that contains want.Message.
func IsError(err error, want abi.Error) bool {
	var ae *abi.Error
	if !errors.As(err, &ae) || ae == nil {
		return false
	}
	return ae.Code == want.Code && ae.Field == want.Field && strings.Contains(ae.Message, want.Message)
}

// CheckEmbedded fails the test unless embedded, a plugin's built-in price
// list, is byte for byte NAME.json in the working directory (the copy the
// host passes).
func CheckEmbedded(t testing.TB, name string, embedded []byte) {
	t.Helper()
	disk, err := os.ReadFile(name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if string(disk) != string(embedded) {
		t.Fatalf("the embedded price list differs from %s.json", name)
	}
}

// Hand is one fixture's numbers worked out by hand.
type Hand struct {
	// File is the fixture's file name without ".json".
	File string
	// Usage, when not nil, is the usage the fixture must record.
	Usage *abi.Usage
	// Hold and Charge are the nano-USD the fixture must expect.
	Hold, Charge int64
}

// CheckHand pins the fixtures of dir to hand-checked numbers: every row's
// fixture must exist and expect its Hold and Charge (and record its Usage,
// when given), one subtest per row, and every fixture that expects no error
// must have a row.
func CheckHand(t *testing.T, dir string, rows []Hand) {
	t.Helper()
	list, err := fixture.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	byFile := map[string]fixture.Fixture{}
	for _, f := range list {
		byFile[strings.TrimSuffix(filepath.Base(f.Path), ".json")] = f
	}
	checked := map[string]bool{}
	for _, r := range rows {
		checked[r.File] = true
	}
	for name, f := range byFile {
		if f.Expect.Error == nil && !checked[name] {
			t.Errorf("%s: a priced fixture without a hand-checked row here", name)
		}
	}
	for _, r := range rows {
		t.Run(r.File, func(t *testing.T) {
			f, ok := byFile[r.File]
			if !ok {
				t.Fatal("fixture missing")
			}
			if r.Usage != nil && (f.Usage == nil || *f.Usage != *r.Usage) {
				t.Errorf("usage %+v, hand-checked %+v", f.Usage, *r.Usage)
			}
			if f.Expect.Hold == nil || *f.Expect.Hold != r.Hold {
				t.Errorf("expect.hold %s, hand-checked %d", show(f.Expect.Hold), r.Hold)
			}
			if f.Expect.Charge == nil || *f.Expect.Charge != r.Charge {
				t.Errorf("expect.charge %s, hand-checked %d", show(f.Expect.Charge), r.Charge)
			}
		})
	}
}

func show(p *int64) string {
	if p == nil {
		return "missing"
	}
	return fmt.Sprint(*p)
}
