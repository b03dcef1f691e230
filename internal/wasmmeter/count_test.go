package wasmmeter

import (
	"context"
	"math/rand/v2"
	"testing"
)

// The differential test of the meter: generated programs whose charge
// points executed are known (counted loops, branches decided by constants,
// blocks left early, calls), run metered with fuel 1. Every charge costs at
// least 1, so with fuel 1 every charge point executed calls the host exactly
// once, and the tick count must equal the count an interpreter of the
// program's tree computes: one per function entry, one per pass through a
// loop header (a loop of k iterations passes its header k+1 times: once on
// entry and once per branch back). A charge placed where the code does not
// pass, or missing where it does, shows up as a difference. The program also
// counts its own steps in an exported global, which the metered module must
// leave exactly as the original does.

// stmt is one statement of a generated function.
type stmt struct {
	kind  int    // stmtStep, stmtLoop, stmtIf, stmtLeave, stmtCall
	k     int    // loop: iterations; if: the constant condition (0 or 1)
	fn    int    // call: the callee
	body  []stmt // loop body, if's then-branch, leave's statements before the exit
	other []stmt // if's else-branch, leave's statements after the exit (never run)
}

const (
	stmtStep  = iota // g += 1
	stmtLoop         // a loop of k iterations around body
	stmtIf           // if k then body else other
	stmtLeave        // block { body; br 0; other }
	stmtCall         // call fn
)

// program is a generated module: funcs[0] is exported as "run"; a
// function calls only functions after it, so nothing recurses.
type program struct{ funcs [][]stmt }

// gen draws a program from pick (pick(n) is in [0, n)).
func gen(pick func(n int) int) program {
	nf := 1 + pick(4)
	p := program{funcs: make([][]stmt, nf)}
	for i := nf - 1; i >= 0; i-- {
		p.funcs[i] = genBlock(pick, i, nf, 0, 0)
	}
	return p
}

const (
	maxDepth = 3 // loops nest at most this deep: one counter local each
	maxNest  = 5 // compound statements nest at most this deep
)

// genBlock draws up to three statements of function fn, inside depth loops
// and nest compound statements.
func genBlock(pick func(int) int, fn, nf, depth, nest int) []stmt {
	n := pick(4)
	out := make([]stmt, 0, n)
	for range n {
		s := stmt{kind: pick(5)}
		if nest == maxNest && s.kind != stmtCall || s.kind == stmtLoop && depth == maxDepth {
			s.kind = stmtStep
		}
		switch s.kind {
		case stmtLoop:
			s.k = pick(4)
			s.body = genBlock(pick, fn, nf, depth+1, nest+1)
		case stmtIf:
			s.k = pick(2)
			s.body = genBlock(pick, fn, nf, depth, nest+1)
			s.other = genBlock(pick, fn, nf, depth, nest+1)
		case stmtLeave:
			s.body = genBlock(pick, fn, nf, depth, nest+1)
			s.other = genBlock(pick, fn, nf, depth, nest+1)
		case stmtCall:
			if fn+1 >= nf {
				s.kind = stmtStep
				break
			}
			s.fn = fn + 1 + pick(nf-fn-1)
		}
		out = append(out, s)
	}
	return out
}

// run interprets the program: the charge points passed and the steps taken
// by a call of function 0. Each function is counted once, from the last to
// the first (calls go only forward), and the counts stop growing past
// maxCharges+1, so that a program too long to run is known at once.
func (p program) run() (charges, steps int64) {
	per := make([][2]int64, len(p.funcs))
	for i := len(p.funcs) - 1; i >= 0; i-- {
		c, n := p.block(p.funcs[i], per)
		per[i] = [2]int64{capped(1 + c), capped(n)} // 1: the function's entry
	}
	return per[0][0], per[0][1]
}

// capped bounds a count at maxCharges+1.
func capped(n int64) int64 { return min(n, maxCharges+1) }

func (p program) block(ss []stmt, per [][2]int64) (charges, steps int64) {
	for _, s := range ss {
		var c, n int64
		switch s.kind {
		case stmtStep:
			n = 1
		case stmtLoop:
			bc, bn := p.block(s.body, per)
			c, n = int64(s.k+1)+int64(s.k)*bc, int64(s.k)*bn
		case stmtIf:
			if s.k == 1 {
				c, n = p.block(s.body, per)
			} else {
				c, n = p.block(s.other, per)
			}
		case stmtLeave:
			c, n = p.block(s.body, per)
		case stmtCall:
			c, n = per[s.fn][0], per[s.fn][1]
		}
		charges, steps = capped(charges+c), capped(steps+n)
	}
	return charges, steps
}

// module encodes the program: type () -> (), one mutable i32 global g
// (exported "g"), function 0 exported "run".
func (p program) module() []byte {
	var funcs, bodies [][]byte
	for _, f := range p.funcs {
		funcs = append(funcs, u32(0))
		bodies = append(bodies, body(locals(maxDepth, typeI32), encodeBlock(f, 0), op(opEnd)))
	}
	return wasmModule(
		sec(secType, vec(funcType(nil, nil))),
		sec(secFunction, vec(funcs...)),
		sec(secGlobal, vec(cat([]byte{typeI32, 0x01}, i32c(0), op(opEnd)))),
		sec(secExport, vec(exportFunc("run", 0), cat(name("g"), []byte{0x03}, u32(0)))),
		sec(secCode, vec(bodies...)),
	)
}

func encodeBlock(ss []stmt, depth uint32) []byte {
	var out []byte
	for _, s := range ss {
		switch s.kind {
		case stmtStep:
			out = cat(out, []byte{opGlobalGet, 0}, i32c(1), op(i32Add), []byte{opGlobalSet, 0})
		case stmtLoop:
			// c = k; block { loop { if c == 0 break; body; c -= 1; continue } }
			out = cat(out, i32c(int32(s.k)), localSet(depth),
				op(opBlock, blockEmpty, opLoop, blockEmpty),
				localGet(depth), op(i32Eqz), brIf(1),
				encodeBlock(s.body, depth+1),
				localGet(depth), i32c(1), op(i32Sub), localSet(depth),
				br(0),
				op(opEnd, opEnd))
		case stmtIf:
			out = cat(out, i32c(int32(s.k)), op(opIf, blockEmpty), encodeBlock(s.body, depth),
				op(opElse), encodeBlock(s.other, depth), op(opEnd))
		case stmtLeave:
			out = cat(out, op(opBlock, blockEmpty), encodeBlock(s.body, depth), br(0),
				encodeBlock(s.other, depth), op(opEnd))
		case stmtCall:
			out = cat(out, call(uint32(s.fn)))
		}
	}
	return out
}

// checkCounts runs p plain and metered with fuel 1 and compares the ticks
// and the steps with the interpreter's.
func checkCounts(t *testing.T, p program) {
	t.Helper()
	ctx := context.Background()
	wasm := p.module()
	metered, _, err := Instrument(wasm, 1)
	if err != nil {
		t.Fatalf("Instrument: %v", err)
	}
	tk := &ticker{}
	rt := newRuntime(t, tk)
	wantCharges, wantSteps := p.run()
	for _, c := range []struct {
		name string
		wasm []byte
	}{{"plain", wasm}, {"metered", metered}} {
		m := instantiate(t, rt, c.wasm)
		before := tk.ticks.Load()
		if _, err := m.ExportedFunction("run").Call(ctx); err != nil {
			t.Fatalf("%s: run: %v", c.name, err)
		}
		if got := int64(m.ExportedGlobal("g").Get()); got != wantSteps {
			t.Errorf("%s: %d steps, want %d", c.name, got, wantSteps)
		}
		ticks := tk.ticks.Load() - before
		if c.name == "plain" && ticks != 0 || c.name == "metered" && ticks != wantCharges {
			t.Errorf("%s: %d ticks, want %d charge points passed", c.name, ticks, wantCharges)
		}
		_ = m.Close(ctx)
	}
}

// maxCharges bounds a generated program's run (each charge is a call into
// Go): calls inside nested loops multiply.
const maxCharges = 20_000

func TestMeterCountsExactly(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	n := 300
	if testing.Short() {
		n = 50
	}
	for i := range n {
		p := gen(func(n int) int { return r.IntN(n) })
		for c, _ := p.run(); c > maxCharges; c, _ = p.run() {
			p = gen(func(n int) int { return r.IntN(n) })
		}
		t.Run("", func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("program %d: %+v", i, p)
				}
			}()
			checkCounts(t, p)
		})
	}
}

// FuzzMeterCounts draws the program from the fuzzer's bytes.
func FuzzMeterCounts(f *testing.F) {
	f.Add([]byte{3, 1, 2, 3, 0, 1, 2})
	f.Add([]byte{0, 3, 1, 3, 3, 1, 3, 1, 4, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		i := 0
		p := gen(func(n int) int {
			if i >= len(b) {
				return 0
			}
			i++
			return int(b[i-1]) % n
		})
		if c, _ := p.run(); c > maxCharges {
			t.Skip("too long a run")
		}
		checkCounts(t, p)
	})
}
