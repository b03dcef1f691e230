package plugins

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

// settleFailOwn is the charge of a settle the settlefail guest answers
// (its OwnCharge).
const settleFailOwn = 4242

func settleFail(model string, params ...string) abi.SettleRequest {
	req := abi.SettleRequest{Endpoint: "chat_completions", Model: model, Route: "standard",
		Usage: abi.Usage{InputTokens: 100, OutputTokens: 10}}
	for i := 0; i+1 < len(params); i += 2 {
		req.Params = append(req.Params, abi.Param{Name: params[i], Value: params[i+1]})
	}
	return req
}

// countAdmit asks the settlefail guest how many calls the instance that
// takes it has served, this one included.
func countAdmit(t *testing.T, h *Host) int64 {
	t.Helper()
	res, err := h.Admit(context.Background(), abi.AdmitRequest{Endpoint: "chat_completions", Model: "modelf-flash",
		Route: "standard", Params: []abi.Param{{Name: "count", Value: "1"}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Hold
}

// A settle that fails in any way is tried once more, on a new instance; when
// that fails too the error names the plugin, both failures are counted, and
// neither instance is kept — a guest's own error on a settle included.
func TestSettleFailureRetriedOnce(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "settlefail")
	// One instance, so that "kept" and "discarded" are observable; a short
	// deadline for the loop.
	h, logs := openDir(t, dir, Config{PoolSize: 1, CallTimeout: 250 * time.Millisecond})
	ctx := context.Background()
	for _, tc := range []struct {
		fail string
		want func(t *testing.T, err error)
	}{
		{"trap", func(t *testing.T, err error) {
			if !strings.Contains(err.Error(), "wasm error") && !strings.Contains(err.Error(), "exit_code") {
				t.Errorf("err = %v, want the trap", err)
			}
		}},
		{"loop", func(t *testing.T, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want the deadline", err)
			}
		}},
		{"garbage", func(t *testing.T, err error) {
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("err = %v, want ErrMalformed", err)
			}
		}},
		{"refuse", func(t *testing.T, err error) {
			var ae *abi.Error
			if !errors.As(err, &ae) || ae.Message != "cannot price this usage" {
				t.Errorf("err = %v, want the guest's error wrapped", err)
			}
		}},
	} {
		t.Run(tc.fail, func(t *testing.T) {
			if n := countAdmit(t, h); n < 1 {
				t.Fatalf("count = %d", n)
			}
			before := stats(t, h, "settlefail")
			res, err := h.Settle(ctx, settleFail("modelf-flash", "fail", tc.fail))
			if err == nil {
				t.Fatalf("settle succeeded: %+v", res)
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Plugin != "settlefail" || pe.Op != "settle" {
				t.Fatalf("err = %v (%T), want a *plugins.Error naming settlefail", err, err)
			}
			tc.want(t, err)
			after := stats(t, h, "settlefail")
			if after.Failures != before.Failures+2 || after.Calls != before.Calls+2 {
				t.Errorf("failures %d → %d, calls %d → %d: want the call and its retry", before.Failures, after.Failures, before.Calls, after.Calls)
			}
			if !strings.Contains(logs.String(), "retrying once on a fresh instance") {
				t.Error("the retry was not logged")
			}
			// Both instances were discarded: the next call is the first of a
			// new one.
			if n := countAdmit(t, h); n != 1 {
				t.Errorf("the next call is call %d of its instance, want 1 (a new instance)", n)
			}
			if s := stats(t, h, "settlefail"); s.Instances != 1 {
				t.Errorf("instances = %d, want 1", s.Instances)
			}
		})
	}
}

// The retry runs on an instance created for it, not on another of the pool:
// every instance of the pool has gone bad (served an admit), and the retry
// still gets the plugin's own answer.
func TestSettleRetryUsesAFreshInstance(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "settlefail")
	h, logs := openDir(t, dir, Config{PoolSize: 2})
	ctx := context.Background()
	v := h.cat.Load().versions["settlefail"]
	v.warm(ctx, 2)
	if s := stats(t, h, "settlefail"); s.Instances != 2 || s.Idle != 2 {
		t.Fatalf("pool %+v, want 2 idle instances", s)
	}
	// The pool hands its idle instances out in turn: two admits reach both.
	for range 2 {
		if n := countAdmit(t, h); n != 1 {
			t.Fatalf("count = %d, want each instance's first call", n)
		}
	}
	before := stats(t, h, "settlefail")
	res, err := h.Settle(ctx, settleFail("modelf-v4-pro")) // fails on an instance that admitted
	if err != nil {
		t.Fatalf("settle: %v\n%s", err, logs.String())
	}
	if res.Charge != settleFailOwn {
		t.Fatalf("charge %d, want the plugin's own %d", res.Charge, settleFailOwn)
	}
	after := stats(t, h, "settlefail")
	if after.Failures != before.Failures+1 {
		t.Errorf("failures %d → %d, want the first attempt's", before.Failures, after.Failures)
	}
	if after.Instances > 2 {
		t.Errorf("instances = %d, above the pool size", after.Instances)
	}
	// A settle that succeeds at once is not retried.
	before = after
	if res, err := h.Settle(ctx, settleFail("modelf-v4-pro", "when", "never")); err != nil || res.Charge != settleFailOwn {
		t.Fatalf("settle: %+v, %v", res, err)
	}
	if after := stats(t, h, "settlefail"); after.Calls != before.Calls+1 || after.Failures != before.Failures {
		t.Errorf("a good settle: calls %d → %d, failures %d → %d", before.Calls, after.Calls, before.Failures, after.Failures)
	}
}

// No retry when there is nothing to retry: no plugin serves the model, or
// the caller has gone.
func TestSettleNotRetried(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "settlefail")
	h, logs := openDir(t, dir, Config{PoolSize: 1})
	if _, err := h.Settle(context.Background(), settleFail("no-such-model")); !errors.Is(err, ErrNoPlugin) {
		t.Fatalf("err = %v, want ErrNoPlugin", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := stats(t, h, "settlefail")
	if _, err := h.Settle(ctx, settleFail("modelf-flash")); err == nil {
		t.Fatal("a settle whose caller has gone succeeded")
	}
	if after := stats(t, h, "settlefail"); after.Calls != before.Calls+1 || after.Failures != before.Failures {
		t.Errorf("calls %d → %d, failures %d → %d: want one call, not the plugin's failure", before.Calls, after.Calls, before.Failures, after.Failures)
	}
	if strings.Contains(logs.String(), "retrying") {
		t.Errorf("retried:\n%s", logs.String())
	}
}
