package guest

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

// withPlugin registers p for the duration of the test.
func withPlugin(t *testing.T, p Plugin) {
	t.Helper()
	t.Cleanup(Reset())
	Register(p)
}

func admitBytes(r abi.AdmitRequest) []byte { return r.AppendTo(nil) }

// result decodes an envelope: the payload or the guest error.
func result(t *testing.T, env []byte) ([]byte, *abi.Error) {
	t.Helper()
	payload, gerr, derr := abi.DecodeResult(env)
	if derr != nil {
		t.Fatalf("malformed envelope %x: %v", env, derr)
	}
	return payload, gerr
}

func TestCallDispatch(t *testing.T) {
	var configured []byte
	withPlugin(t, Plugin{
		Name:      "demo",
		Configure: func(c []byte) error { configured = append([]byte(nil), c...); return nil },
		Admit: func(r abi.AdmitRequest) (abi.AdmitResult, error) {
			return abi.AdmitResult{Hold: r.InputTokens * 2, Set: []abi.Param{{Name: "size", Value: "1024x1024"}}}, nil
		},
		Settle: func(r abi.SettleRequest) (abi.SettleResult, error) {
			return abi.SettleResult{Charge: r.Usage.OutputTokens}, nil
		},
		Select: func(r abi.SelectRequest) (abi.SelectResult, error) {
			return abi.SelectResult{Plan: []abi.Step{{Line: r.Lines[0].Name, Weight: 1}}}, nil
		},
	})

	payload, gerr := result(t, Call(abi.OpConfigure, []byte(`{"x":1}`)))
	if gerr != nil || len(payload) != 0 || string(configured) != `{"x":1}` {
		t.Fatalf("configure: %v %x %q", gerr, payload, configured)
	}

	payload, gerr = result(t, Call(abi.OpDescribe, nil))
	var d abi.Description
	if gerr != nil || d.Decode(payload) != nil {
		t.Fatalf("describe: %v", gerr)
	}
	want := abi.Description{Name: "demo", Implements: []string{abi.CapValidate, abi.CapQuote, abi.CapPrice, abi.CapSelect}}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("describe = %+v, want %+v", d, want)
	}

	payload, gerr = result(t, Call(abi.OpAdmit, admitBytes(abi.AdmitRequest{InputTokens: 21})))
	var ar abi.AdmitResult
	if gerr != nil || ar.Decode(payload) != nil || ar.Hold != 42 || len(ar.Set) != 1 {
		t.Fatalf("admit: %v %+v", gerr, ar)
	}

	payload, gerr = result(t, Call(abi.OpSettle, (&abi.SettleRequest{Usage: abi.Usage{OutputTokens: 7}}).AppendTo(nil)))
	var sr abi.SettleResult
	if gerr != nil || sr.Decode(payload) != nil || sr.Charge != 7 {
		t.Fatalf("settle: %v %+v", gerr, sr)
	}

	payload, gerr = result(t, Call(abi.OpSelect, (&abi.SelectRequest{Lines: []abi.Line{{Name: "a"}}}).AppendTo(nil)))
	var pl abi.SelectResult
	if gerr != nil || pl.Decode(payload) != nil || len(pl.Plan) != 1 || pl.Plan[0].Line != "a" {
		t.Fatalf("select: %v %+v", gerr, pl)
	}

	// AppendCall appends after what dst holds.
	env := AppendCall([]byte("xy"), abi.OpDescribe, nil)
	if string(env[:2]) != "xy" || env[2] != abi.ResultOK {
		t.Fatalf("AppendCall = %x", env)
	}
}

func TestCallErrors(t *testing.T) {
	boom := func(abi.AdmitRequest) (abi.AdmitResult, error) { panic("boom") }
	tests := []struct {
		name   string
		plugin Plugin
		op     abi.Op
		input  []byte
		want   abi.Error // Message is a substring
	}{
		{"panic", Plugin{Name: "p", Admit: boom}, abi.OpAdmit, admitBytes(abi.AdmitRequest{}),
			abi.Error{Code: abi.CodeInternal, Message: "plugin p panicked: boom"}},
		{"nil pointer panic", Plugin{Name: "p", Admit: func(abi.AdmitRequest) (abi.AdmitResult, error) {
			var m map[string]*int
			return abi.AdmitResult{Hold: int64(*m["x"])}, nil
		}}, abi.OpAdmit, admitBytes(abi.AdmitRequest{}),
			abi.Error{Code: abi.CodeInternal, Message: "plugin p panicked: runtime error: invalid memory address"}},
		{"plugin error kept", Plugin{Name: "p", Admit: func(abi.AdmitRequest) (abi.AdmitResult, error) {
			return abi.AdmitResult{}, &abi.Error{Code: abi.CodeInvalid, Field: "max_tokens", Message: "max_tokens 9 is too many"}
		}}, abi.OpAdmit, admitBytes(abi.AdmitRequest{}),
			abi.Error{Code: abi.CodeInvalid, Field: "max_tokens", Message: "max_tokens 9 is too many"}},
		{"wrapped plugin error kept", Plugin{Name: "p", Settle: func(abi.SettleRequest) (abi.SettleResult, error) {
			return abi.SettleResult{}, errWrap{&abi.Error{Code: abi.CodeForbidden, Message: "no"}}
		}}, abi.OpSettle, (&abi.SettleRequest{}).AppendTo(nil),
			abi.Error{Code: abi.CodeForbidden, Message: "no"}},
		{"plain error wrapped", Plugin{Name: "p", Settle: func(abi.SettleRequest) (abi.SettleResult, error) {
			return abi.SettleResult{}, errors.New("disk on fire")
		}}, abi.OpSettle, (&abi.SettleRequest{}).AppendTo(nil),
			abi.Error{Code: abi.CodeInternal, Message: "plugin p settle: disk on fire"}},
		{"configure error", Plugin{Name: "p", Configure: func([]byte) error { return errors.New("bad price") }}, abi.OpConfigure, []byte("{}"),
			abi.Error{Code: abi.CodeInternal, Message: "plugin p configure: bad price"}},
		{"unexpected config", Plugin{Name: "p"}, abi.OpConfigure, []byte("{}"),
			abi.Error{Code: abi.CodeInternal, Message: "plugin p takes no configuration, but was given 2 bytes"}},
		{"missing admit", Plugin{Name: "p"}, abi.OpAdmit, admitBytes(abi.AdmitRequest{}),
			abi.Error{Code: abi.CodeInternal, Message: "plugin p does not implement admit"}},
		{"missing settle", Plugin{Name: "p"}, abi.OpSettle, nil,
			abi.Error{Code: abi.CodeInternal, Message: "plugin p does not implement settle"}},
		{"missing select", Plugin{Name: "p"}, abi.OpSelect, nil,
			abi.Error{Code: abi.CodeInternal, Message: "plugin p does not implement select"}},
		{"malformed input", Plugin{Name: "p", Admit: boom}, abi.OpAdmit, []byte{0x80},
			abi.Error{Code: abi.CodeInternal, Message: "plugin p: malformed input from the host: abi: decode AdmitRequest.Now"}},
		{"unknown op", Plugin{Name: "p"}, abi.Op(99), nil,
			abi.Error{Code: abi.CodeInternal, Message: "plugin p: unknown op 99"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withPlugin(t, tt.plugin)
			_, gerr := result(t, Call(tt.op, tt.input))
			if gerr == nil {
				t.Fatal("no error")
			}
			if gerr.Code != tt.want.Code || gerr.Field != tt.want.Field || !strings.Contains(gerr.Message, tt.want.Message) {
				t.Fatalf("error = %+v, want %+v", *gerr, tt.want)
			}
		})
	}
}

type errWrap struct{ err error }

func (e errWrap) Error() string { return "wrapped: " + e.err.Error() }
func (e errWrap) Unwrap() error { return e.err }

func TestRegister(t *testing.T) {
	tests := []struct {
		name    string
		plugins []Plugin
		want    string
	}{
		{"no plugin", nil, "no plugin registered"},
		{"no name", []Plugin{{}}, "the plugin has no Name"},
		{"twice", []Plugin{{Name: "a"}, {Name: "b"}}, `called twice (plugins "a" and "b")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Cleanup(Reset())
			for _, p := range tt.plugins {
				Register(p)
			}
			for _, op := range []abi.Op{abi.OpConfigure, abi.OpDescribe, abi.OpAdmit} {
				_, gerr := result(t, Call(op, nil))
				if gerr == nil || gerr.Code != abi.CodeInternal || !strings.Contains(gerr.Message, tt.want) {
					t.Fatalf("op %d: %+v, want internal %q", op, gerr, tt.want)
				}
			}
			if _, ok := Registered(); ok {
				t.Fatal("Registered reports a plugin")
			}
		})
	}
}

func TestDescribeKeepsPluginDescription(t *testing.T) {
	withPlugin(t, Plugin{
		Name:     "p",
		Describe: func() abi.Description { return abi.Description{Name: "other", Implements: []string{abi.CapPrice}} },
		Admit:    func(abi.AdmitRequest) (abi.AdmitResult, error) { return abi.AdmitResult{}, nil },
	})
	payload, gerr := result(t, Call(abi.OpDescribe, nil))
	var d abi.Description
	if gerr != nil || d.Decode(payload) != nil {
		t.Fatal(gerr)
	}
	if d.Name != "other" || !reflect.DeepEqual(d.Implements, []string{abi.CapPrice}) {
		t.Fatalf("describe = %+v", d)
	}
	if p, ok := Registered(); !ok || p.Name != "p" {
		t.Fatalf("Registered = %+v, %v", p, ok)
	}
}
