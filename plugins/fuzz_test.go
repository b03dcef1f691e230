package plugins

import (
	"context"
	"errors"
	"testing"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

// envelopeSeeds are result envelopes worth starting from: valid results of
// every op, guest errors, and near misses.
func envelopeSeeds() [][]byte {
	admit := abi.AdmitResult{Hold: 12345, Set: []abi.Param{{Name: "size", Value: "1024x1024"}}}
	settle := abi.SettleResult{Charge: 99}
	sel := abi.SelectResult{Plan: []abi.Step{{Line: "a", Weight: 1}, {Line: "b", Tier: 1, Weight: 2}}}
	desc := abi.Description{Name: "p", Implements: []string{abi.CapQuote, abi.CapPrice}, Models: []abi.Model{tokenModel("m"), imageModel("i")}}
	return [][]byte{
		nil,
		{abi.ResultOK},
		admit.AppendTo(abi.AppendOK(nil)),
		settle.AppendTo(abi.AppendOK(nil)),
		sel.AppendTo(abi.AppendOK(nil)),
		desc.AppendTo(abi.AppendOK(nil)),
		abi.EncodeError(&abi.Error{Code: abi.CodeInvalid, Field: "max_tokens", Message: "too many"}),
		{abi.ResultError, 200},
		{7, 1, 2, 3},
		append(admit.AppendTo(abi.AppendOK(nil)), 0xEE),
		(&abi.AdmitResult{Hold: -1}).AppendTo(abi.AppendOK(nil)),
		(&abi.SettleResult{Charge: -1}).AppendTo(abi.AppendOK(nil)),
	}
}

// FuzzResultEnvelope feeds arbitrary bytes to the host's handling of every
// result a guest can send: the envelope, the results of admit, settle and
// select (with their checks), and a description (with its validation). None
// may panic, and what is accepted must satisfy the checks.
func FuzzResultEnvelope(f *testing.F) {
	for _, s := range envelopeSeeds() {
		f.Add(s)
	}
	req := &abi.SelectRequest{Model: "m", Route: "standard", Lines: []abi.Line{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}, {Name: "c", Open: true}}}
	f.Fuzz(func(t *testing.T, data []byte) {
		payload, gerr, err := abi.DecodeResult(data)
		if err != nil || gerr != nil {
			if err == nil && (len(data) == 0 || data[0] != abi.ResultError) {
				t.Fatalf("guest error from an envelope whose status is not error: %x", data)
			}
			return
		}
		var a admitOut
		if a.Decode(payload) == nil && a.r.Hold < 0 {
			t.Fatalf("accepted a negative hold %d", a.r.Hold)
		}
		var s settleOut
		if s.Decode(payload) == nil && s.r.Charge < 0 {
			t.Fatalf("accepted a negative charge %d", s.r.Charge)
		}
		sel := selectOut{req: req}
		if sel.Decode(payload) == nil {
			for _, step := range sel.r.Plan {
				if step.Line != "a" && step.Line != "b" {
					t.Fatalf("accepted a plan with line %q", step.Line)
				}
			}
		}
		var d abi.Description
		if d.Decode(payload) == nil {
			if models, err := validateDescription(&d); err == nil {
				for _, m := range models {
					if err := m.Validate(); err != nil {
						t.Fatalf("accepted an invalid model: %v", err)
					}
				}
			}
		}
	})
}

// FuzzGuestEnvelope has a real guest (the hostile "garbage" plugin, echo
// mode) return arbitrary bytes as its admit result envelope, through guest
// memory and the whole call path. Whatever the bytes, the host returns a
// result, the guest's error, or an *Error wrapping ErrMalformed — and the
// plugin answers the next normal call.
func FuzzGuestEnvelope(f *testing.F) {
	for _, s := range envelopeSeeds() {
		f.Add(s)
	}
	dir := f.TempDir()
	stage(f, dir, "garbage")
	h, err := Open(context.Background(), Config{Dir: dir, CacheDir: wasmCache, Poll: -1, PoolSize: 1,
		CallTimeout: defaultTestTimeout, Logger: (&testLogger{}).logger()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { h.Close(context.Background()) })
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		req := hostileAdmit("garbage-model", "echo")
		req.Params = append(req.Params, abi.Param{Name: "envelope", Value: string(data)})
		res, err := h.Admit(ctx, req)
		var ae *abi.Error
		var pe *Error
		switch {
		case err == nil:
			if res.Hold < 0 {
				t.Fatalf("negative hold %d accepted", res.Hold)
			}
		case errors.As(err, &ae):
			if len(data) == 0 || data[0] != abi.ResultError {
				t.Fatalf("guest error %v from an envelope whose status is not error", err)
			}
		case errors.As(err, &pe):
			if pe.Plugin != "garbage" || !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want a malformed result from garbage", err)
			}
		default:
			t.Fatalf("err = %v (%T)", err, err)
		}
		if res, err := h.Admit(ctx, hostileAdmit("garbage-model", "")); err != nil || res.Hold != 1 {
			t.Fatalf("next normal call: %+v, %v", res, err)
		}
	})
}
