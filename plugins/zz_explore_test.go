package plugins

import (
	"context"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

func BenchmarkZZParts(b *testing.B) {
	h := benchHost(b)
	v := h.Catalog().versions["tokens"]
	ctx := context.Background()
	in, _ := v.get(ctx)
	defer v.put(in)
	ver := in.mod.ExportedFunction(abi.ExportVersion)
	req := tokensAdmit()
	enc := req.AppendTo(nil)
	b.Run("version-guarded-bg", func(b *testing.B) {
		for b.Loop() {
			ver.CallWithStack(ctx, in.stack[:1])
		}
	})
	b.Run("version-guarded-timeout", func(b *testing.B) {
		for b.Loop() {
			c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			ver.CallWithStack(c, in.stack[:1])
			cancel()
		}
	})
	b.Run("alloc", func(b *testing.B) {
		c, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		for b.Loop() {
			in.stack[0] = uint64(len(enc))
			in.alloc.CallWithStack(c, in.stack[:1])
		}
	})
	b.Run("invoke-admit", func(b *testing.B) {
		c, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		for b.Loop() {
			if _, err := in.invoke(c, abi.OpAdmit, enc, maxResult); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("invoke-admit-bg", func(b *testing.B) {
		for b.Loop() {
			if _, err := in.invoke(ctx, abi.OpAdmit, enc, maxResult); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("invoke-badop-bg", func(b *testing.B) {
		for b.Loop() {
			if _, err := in.invoke(ctx, 99, enc, maxResult); err != nil {
				b.Fatal(err)
			}
		}
	})
}
