package plugins

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

func BenchmarkZZGuard(b *testing.B) {
	for _, guard := range []bool{false, true} {
		b.Run(map[bool]string{false: "noguard", true: "guard"}[guard], func(b *testing.B) {
			ctx := context.Background()
			cache, _ := wazero.NewCompilationCacheWithDir(wasmCache)
			rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(guard).WithCompilationCache(cache))
			defer rt.Close(ctx)
			wasi_snapshot_preview1.MustInstantiate(ctx, rt)
			cm, err := rt.CompileModule(ctx, wasmBytes(b, "tokens"))
			if err != nil {
				b.Fatal(err)
			}
			mod, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize"))
			if err != nil {
				b.Fatal(err)
			}
			in := &instance{mod: mod, alloc: mod.ExportedFunction(abi.ExportAlloc), call: mod.ExportedFunction(abi.ExportCall), mem: mod.ExportedMemory("memory")}
			if _, err := in.invoke(ctx, abi.OpConfigure, configBytes(b, "tokens"), maxResult); err != nil {
				b.Fatal(err)
			}
			ver := mod.ExportedFunction(abi.ExportVersion)
			req := tokensAdmit()
			enc := req.AppendTo(nil)
			b.Run("version", func(b *testing.B) {
				for b.Loop() {
					ver.CallWithStack(ctx, in.stack[:1])
				}
			})
			b.Run("admit", func(b *testing.B) {
				for b.Loop() {
					if _, err := in.invoke(ctx, abi.OpAdmit, enc, maxResult); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
