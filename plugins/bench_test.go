package plugins

import (
	"context"
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/modelrelay/modelrelay/internal/wasmmeter"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// benchConfig is the production configuration, guard included: every
// module is metered and every call runs under a deadline, as in production.
// The deadline is 1s instead of 50ms only so that a benchmark on a loaded
// machine does not fail on a scheduling hiccup; its length does not change
// what a call costs.
func benchConfig(dir string) Config {
	return Config{Dir: dir, CacheDir: wasmCache, Poll: -1, CallTimeout: time.Second, Logger: (&testLogger{}).logger()}
}

// benchHost opens tokens and lines with the production configuration and
// warms the pools.
func benchHost(b *testing.B) *Host {
	b.Helper()
	dir := b.TempDir()
	stage(b, dir, "tokens", "lines")
	h, err := Open(context.Background(), benchConfig(dir))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(context.Background()) })
	if _, err := h.Admit(context.Background(), tokensAdmit()); err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkCall is one Admit on the tokens plugin from a warm pool.
func BenchmarkCall(b *testing.B) {
	h := benchHost(b)
	ctx := context.Background()
	req := tokensAdmit()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Admit(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallAfterIdle is BenchmarkCall with the process idle for 5 ms
// before every call, as a gateway at tens of calls per second is: the call
// may then find the guest's code and memory, and the host's, out of the
// CPU's caches and TLBs (how far depends on the machine: how deeply an idle
// CPU sleeps, what else runs on it, whether the goroutine moves). Each call
// is timed on its own (the sleep is not counted, and the testing package's
// timer calls, which read the memory statistics, are kept out of the way);
// ns/op is the median of those times, p90-ns/op the 90th percentile.
// BenchmarkCall's ns/op is a mean, garbage collection included: compare
// the two as orders of magnitude.
func BenchmarkCallAfterIdle(b *testing.B) {
	h := benchHost(b)
	ctx := context.Background()
	req := tokensAdmit()
	took := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		time.Sleep(5 * time.Millisecond)
		t0 := time.Now()
		if _, err := h.Admit(ctx, req); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
	}
	slices.Sort(took)
	rank := func(q float64) time.Duration { // nearest rank
		return took[max(int(math.Ceil(q*float64(len(took))))-1, 0)]
	}
	b.ReportMetric(float64(rank(0.5).Nanoseconds()), "ns/op")
	b.ReportMetric(float64(rank(0.9).Nanoseconds()), "p90-ns/op")
}

// BenchmarkUnpark is the first call on a parked tokens plugin: reading
// and checking its file, metering it, compiling it (a read of wazero's
// compilation cache), creating an instance and the Admit itself. It is
// what a call pays after the plugin had no call for plugins.idle_release.
// The benchmark parks the plugin itself before every call.
func BenchmarkUnpark(b *testing.B) {
	h := benchHost(b)
	ctx := context.Background()
	req := tokensAdmit()
	v := h.Catalog().versions["tokens"]
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if !v.park(0, time.Now().Add(time.Second)) {
			b.Fatal("tokens did not park")
		}
		b.StartTimer()
		if _, err := h.Admit(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallParallel is BenchmarkCall from GOMAXPROCS goroutines, for
// throughput with the default pool of 2.
func BenchmarkCallParallel(b *testing.B) {
	h := benchHost(b)
	ctx := context.Background()
	req := tokensAdmit()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := h.Admit(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkRequest is the plugin time of one relayed request: Admit, a
// (cached) Select and Settle.
func BenchmarkRequest(b *testing.B) {
	h := benchHost(b)
	ctx := context.Background()
	admit := tokensAdmit()
	sel := abi.SelectRequest{Now: admit.Now, Model: admit.Model, Route: admit.Route, Lines: []abi.Line{
		{Name: "std-1", Route: "standard", Models: []string{admit.Model}, Weight: 3},
		{Name: "std-2", Route: "standard", Models: []string{admit.Model}, Weight: 1},
		{Name: "std-backup", Route: "standard", Models: []string{admit.Model}, Priority: 1, Weight: 1},
	}}
	settle := abi.SettleRequest{Now: admit.Now, Endpoint: admit.Endpoint, Model: admit.Model, Route: admit.Route,
		Usage: abi.Usage{InputTokens: 1100, CacheReadTokens: 100, OutputTokens: 240}}
	if _, err := h.Select(ctx, sel); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Admit(ctx, admit); err != nil {
			b.Fatal(err)
		}
		if _, err := h.Select(ctx, sel); err != nil {
			b.Fatal(err)
		}
		if _, err := h.Settle(ctx, settle); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInstantiate is the cost of one new tokens instance: instantiation
// (the guest's Go runtime start), the ABI version check and OpConfigure with
// tokens.json.
func BenchmarkInstantiate(b *testing.B) {
	h := benchHost(b)
	v := h.Catalog().versions["tokens"]
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		in, err := v.newInstance(ctx)
		if err != nil {
			b.Fatal(err)
		}
		in.close()
	}
}

// BenchmarkCallMinimal is one Settle on the hand-written "trap" guest, whose
// settle does no work (it returns a constant without decoding its input):
// what remains is the host and the boundary — the pool, the deadline, two
// guarded calls (mr_alloc, mr_call) and the result decode. Compare with
// BenchmarkCall to see the share of the guest's own work.
func BenchmarkCallMinimal(b *testing.B) {
	dir := b.TempDir()
	stage(b, dir, "trap")
	h, err := Open(context.Background(), benchConfig(dir))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(context.Background()) })
	ctx := context.Background()
	req := abi.SettleRequest{Model: "trap-model", Route: "standard", Usage: abi.Usage{InputTokens: 10}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Settle(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGuardCost measures what stopping a guest costs on the same
// tokens.wasm, outside the pool: an empty export and a whole Admit, with no
// guard at all, with wazero's WithCloseOnContextDone (which the host used
// before the meter) and with the meter the host uses (wasmmeter, tick).
// RATIONALE-plugins.md quotes it.
func BenchmarkGuardCost(b *testing.B) {
	for _, kind := range []string{"none", "wazero", "meter"} {
		b.Run(kind, func(b *testing.B) {
			ctx := context.Background()
			cache, err := wazero.NewCompilationCacheWithDir(wasmCache)
			if err != nil {
				b.Fatal(err)
			}
			defer cache.Close(ctx)
			rc := wazero.NewRuntimeConfigCompiler().WithCompilationCache(cache)
			if kind == "wazero" {
				rc = rc.WithCloseOnContextDone(true)
			}
			rt := wazero.NewRuntimeWithConfig(ctx, rc)
			defer rt.Close(ctx)
			wasi_snapshot_preview1.MustInstantiate(ctx, rt)
			wasm := wasmBytes(b, "tokens")
			callCtx := ctx
			if kind == "meter" {
				if err := instantiateMeter(ctx, rt); err != nil {
					b.Fatal(err)
				}
				if wasm, _, err = wasmmeter.Instrument(wasm, meterFuel); err != nil {
					b.Fatal(err)
				}
				g := &guard{}
				g.arm(time.Now(), time.Hour)
				callCtx = guarded(ctx, g)
			} else if kind == "wazero" {
				var cancel context.CancelFunc
				callCtx, cancel = context.WithTimeout(ctx, time.Hour)
				defer cancel()
			}
			compiled, err := rt.CompileModule(ctx, wasm)
			if err != nil {
				b.Fatal(err)
			}
			mod, err := rt.InstantiateModule(callCtx, compiled, moduleConfig(newStderrLog((&testLogger{}).logger(), "tokens")))
			if err != nil {
				b.Fatal(err)
			}
			in := &instance{mod: mod, alloc: mod.ExportedFunction(abi.ExportAlloc), call: mod.ExportedFunction(abi.ExportCall), mem: mod.ExportedMemory("memory")}
			if _, err := in.invoke(callCtx, abi.OpConfigure, configBytes(b, "tokens"), maxResult); err != nil {
				b.Fatal(err)
			}
			version := mod.ExportedFunction(abi.ExportVersion)
			req := tokensAdmit()
			input := req.AppendTo(nil)
			b.Run("empty", func(b *testing.B) {
				for b.Loop() {
					if err := version.CallWithStack(callCtx, in.stack[:1]); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("admit", func(b *testing.B) {
				for b.Loop() {
					if _, err := in.invoke(callCtx, abi.OpAdmit, input, maxResult); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkGC is one full garbage collection, on one CPU as the gateway
// runs in the benchmark, of a process with tokens and lines loaded as in
// production: what every collection of the gateway pays for two of its
// five plugins (the other three are as large). It reports the heap the
// collector scans (scan-MB) and the live heap (live-MB). wazero holds every
// data segment of a loaded module in the Go heap, so a Go plugin's 40,000
// segments made most of that scan until wasmmeter joined them
// (internal/wasmmeter/data.go).
func BenchmarkGC(b *testing.B) {
	dir := b.TempDir()
	names := []string{"tokens", "lines"}
	stage(b, dir, names...)
	h, err := Open(context.Background(), benchConfig(dir))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(context.Background()) })
	if got := len(h.Catalog().versions); got != len(names) {
		b.Fatalf("%d plugins loaded, want %d", got, len(names))
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	runtime.GC()
	for b.Loop() {
		runtime.GC()
	}
	s := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	b.ReportMetric(float64(s[0].Value.Uint64())/1e6, "scan-MB")
	b.ReportMetric(float64(s[1].Value.Uint64())/1e6, "live-MB")
}
