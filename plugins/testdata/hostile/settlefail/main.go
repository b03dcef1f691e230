// Command settlefail is a hostile plugin whose settle fails. It exports the
// ABI by hand, without the sdk and its recover, so that a trap is a trap.
//
// It serves two chat models of the simulated provider's catalogue (so that
// the gateway's tests can relay calls to them; stage it without the tokens
// plugin), on route standard at $1 per 1M input tokens, $0.50 per 1M cache
// reads and $4 per 1M output tokens:
//
//	modelf-flash   settle always fails
//	modelf-v4-pro  settle fails on an instance that has served an admit (its
//	               state has "gone bad"); an instance that has not, such as
//	               one created afresh for a retry, answers OwnCharge
//
// Admit quotes the published price of its input tokens and of max_tokens
// (or the default) output tokens, like a real plugin. Params override the
// models' behaviour, for the host's tests:
//
//	fail=trap|loop|garbage|refuse  how settle fails: a nil dereference, a
//	                               loop past the deadline, an undecodable
//	                               envelope, a guest error
//	when=always|admitted|never     when settle fails
//	count=1 (admit)                quote a hold of the calls this instance
//	                               has served, this one included
package main

import (
	"unsafe"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

// OwnCharge is what a settle that succeeds charges, whatever the usage: a
// figure no published price gives, so a test can tell it apart.
const OwnCharge = 4242

var (
	input    []byte
	output   []byte
	sink     *int
	spins    uint64
	calls    int64 // calls this instance has served
	admitted bool  // this instance has served an admit
)

//go:wasmexport mr_abi_version
func abiVersion() uint32 { return abi.Version }

//go:wasmexport mr_alloc
func alloc(size uint32) uint32 {
	input = make([]byte, size)
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(input))))
}

func pack(b []byte) uint64 {
	output = b
	return abi.PackResult(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), uint32(len(b)))
}

func fail(msg string) uint64 {
	return pack(abi.EncodeError(&abi.Error{Code: abi.CodeInternal, Message: msg}))
}

// Prices in nano-USD per 1M tokens.
const (
	inputPrice     = 1_000_000_000
	cacheReadPrice = 500_000_000
	outputPrice    = 4_000_000_000
)

func model(id string) abi.Model {
	return abi.Model{
		ID:        id,
		Endpoints: []string{"chat_completions"},
		AutoRoute: "standard",
		Routes: []abi.RoutePrice{{Route: "standard", Price: abi.Price{
			Unit: "per_million_tokens", Input: inputPrice, CacheRead: cacheReadPrice, Output: outputPrice,
		}}},
	}
}

func param(ps []abi.Param, name string) string {
	for _, p := range ps {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

//go:wasmexport mr_call
func call(op, ptr, n uint32) uint64 {
	var req []byte
	if n > 0 {
		req = input[:n]
	}
	switch abi.Op(op) {
	case abi.OpConfigure:
		return pack(abi.AppendOK(nil))
	case abi.OpDescribe:
		d := abi.Description{
			Name:       "settlefail",
			Implements: []string{abi.CapValidate, abi.CapQuote, abi.CapPrice},
			Models:     []abi.Model{model("modelf-flash"), model("modelf-v4-pro")},
		}
		return pack(d.AppendTo(abi.AppendOK(nil)))
	case abi.OpAdmit:
		calls++
		admitted = true
		var r abi.AdmitRequest
		if err := r.Decode(req); err != nil {
			return fail(err.Error())
		}
		if param(r.Params, "count") != "" {
			res := abi.AdmitResult{Hold: calls}
			return pack(res.AppendTo(abi.AppendOK(nil)))
		}
		out := r.MaxOutputTokens
		if out <= 0 {
			out = r.DefaultOutputTokens
		}
		res := abi.AdmitResult{Hold: (r.InputTokens*inputPrice + out*outputPrice + 999_999) / 1_000_000}
		return pack(res.AppendTo(abi.AppendOK(nil)))
	case abi.OpSettle:
		calls++
		var r abi.SettleRequest
		if err := r.Decode(req); err != nil {
			return fail(err.Error())
		}
		how, when := param(r.Params, "fail"), param(r.Params, "when")
		if how == "" {
			how = "trap"
		}
		if when == "" {
			when = "always"
			if r.Model == "modelf-v4-pro" {
				when = "admitted"
			}
		}
		if when == "always" || when == "admitted" && admitted {
			switch how {
			case "trap":
				output = nil
				return uint64(*sink) // nil dereference: the runtime aborts
			case "loop":
				for {
					spins++
				}
			case "garbage":
				return pack([]byte{7, 1, 2, 3})
			default:
				return fail("cannot price this usage")
			}
		}
		res := abi.SettleResult{Charge: OwnCharge}
		return pack(res.AppendTo(abi.AppendOK(nil)))
	}
	return fail("unknown op")
}

func main() {}
