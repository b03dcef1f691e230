package sdk

import (
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/internal/guest"
)

// withPlugin registers p for the duration of the test.
func withPlugin(t *testing.T, p Plugin) {
	t.Helper()
	t.Cleanup(guest.Reset())
	Register(p)
}

// result decodes an envelope: the payload or the guest error.
func result(t *testing.T, env []byte) ([]byte, *abi.Error) {
	t.Helper()
	payload, gerr, derr := abi.DecodeResult(env)
	if derr != nil {
		t.Fatalf("malformed envelope %x: %v", env, derr)
	}
	return payload, gerr
}

func TestRegisterHandsOverEveryHandler(t *testing.T) {
	withPlugin(t, Plugin{
		Name:      "demo",
		Configure: func([]byte) error { return nil },
		Describe:  func() abi.Description { return abi.Description{} },
		Admit:     func(abi.AdmitRequest) (abi.AdmitResult, error) { return abi.AdmitResult{Hold: 1}, nil },
		Settle:    func(abi.SettleRequest) (abi.SettleResult, error) { return abi.SettleResult{Charge: 2}, nil },
		Select:    func(abi.SelectRequest) (abi.SelectResult, error) { return abi.SelectResult{}, nil },
	})
	p, ok := guest.Registered()
	if !ok || p.Name != "demo" || p.Configure == nil || p.Describe == nil || p.Admit == nil || p.Settle == nil || p.Select == nil {
		t.Fatalf("registered %+v, %v", p, ok)
	}
	if _, gerr := result(t, guest.Call(abi.OpAdmit, (&abi.AdmitRequest{}).AppendTo(nil))); gerr != nil {
		t.Fatal(gerr)
	}
}

func TestErrorHelpers(t *testing.T) {
	tests := []struct {
		got  *abi.Error
		want abi.Error
	}{
		{Invalid("size", "size %q is not WxH", "big"), abi.Error{Code: abi.CodeInvalid, Field: "size", Message: `size "big" is not WxH`}},
		{Forbidden("model %s", "x"), abi.Error{Code: abi.CodeForbidden, Message: "model x"}},
		{Unprocessable("q"), abi.Error{Code: abi.CodeUnprocessable, Message: "q"}},
		{Internal("i %d", 1), abi.Error{Code: abi.CodeInternal, Message: "i 1"}},
	}
	for _, tt := range tests {
		if *tt.got != tt.want {
			t.Errorf("got %+v, want %+v", *tt.got, tt.want)
		}
	}
}
