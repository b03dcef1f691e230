package sim

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// loopScript scripts three calls; the second line has surrounding spaces
// and arguments to compact, the third none.
const loopScript = "Please do the work.\nsim:call read {\"path\": \"a.go\"}\n  sim:call write {\"path\":\"b.go\", \"text\":\"héllo wörld\"}  \nsim:call list\n"

var loopCalls = []lCall{
	{name: "read", args: `{"path":"a.go"}`},
	{name: "write", args: `{"path":"b.go","text":"héllo wörld"}`},
	{name: "list", args: `{}`},
}

var loopProtos = []*lProto{&chatProto, &messagesProto, &responsesProto, &geminiProto}

// TestToolLoop runs the scripted loop in every protocol, JSON and
// streamed, one call at a time and in parallel, with and without
// thinking: each answer is the next call(s), sent back with its results
// (and its thinking, signed), until the final reply; every usage number
// is the documented rule's and the usage helper's.
func TestToolLoop(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{Chunks: 3})
	for _, p := range loopProtos {
		for _, stream := range []bool{false, true} {
			for _, parallel := range []bool{false, true} {
				for _, thinking := range []bool{false, true} {
					name := p.name + map[bool]string{false: "/json", true: "/stream"}[stream] +
						map[bool]string{false: "/serial", true: "/parallel"}[parallel] + map[bool]string{false: "", true: "/thinking"}[thinking]
					t.Run(name, func(t *testing.T) { runLoop(t, ts, p, stream, parallel, thinking) })
				}
			}
		}
	}
}

func runLoop(t *testing.T, ts *httptest.Server, p *lProto, stream, parallel, thinking bool) {
	text := loopScript
	if parallel {
		text += "sim:calls-parallel\n"
	}
	conv := []lTurn{{role: "user", text: text}}
	var extra map[string]any
	var mind int64
	if thinking {
		extra, mind = p.think, ThinkingLow
	}
	seen := map[string]bool{}
	for next, step := 0, 0; ; step++ {
		if step > len(loopCalls) {
			t.Fatal("the loop does not end")
		}
		body := p.body(conv, stream, extra)
		a := p.post(t, ts, body, stream)
		checkLoopUsage(t, p, body, a, mind)
		checkThinking(t, p, a, mind)
		if next == len(loopCalls) {
			echo := ""
			if p == &chatProto || p == &responsesProto {
				echo = text // the scripting message is the last user message
			}
			want, _ := ReplyText(p.model, echo, 0)
			if a.text != want || len(a.calls) != 0 || a.finish != p.stopFinish {
				t.Fatalf("final answer %q %+v finish %q, want %q", a.text, a.calls, a.finish, want)
			}
			if a.output != wantOutput(p, int64(len(strings.Fields(want))), mind) {
				t.Fatalf("final output %d", a.output)
			}
			return
		}
		batch := loopCalls[next : next+1]
		if parallel {
			batch = loopCalls[next:]
		}
		checkCalls(t, p, a, batch, seen, stream)
		var res []lCall
		for _, c := range a.calls {
			res = append(res, lCall{id: c.id, name: c.name, args: "result of " + c.name})
		}
		conv = append(conv, lTurn{role: "assistant", a: a}, lTurn{role: "results", res: res})
		next += len(batch)
	}
}

// wantOutput is the output an answer reports: its words and call tokens,
// plus the reasoning where the protocol counts it in.
func wantOutput(p *lProto, text, mind int64) int64 {
	if p.separateMind {
		return text
	}
	return text + mind
}

func checkLoopUsage(t *testing.T, p *lProto, body []byte, a lAnswer, mind int64) {
	t.Helper()
	want, err := p.usage(body)
	if err != nil {
		t.Fatalf("usage helper: %v", err)
	}
	if a.prompt != want.Prompt || a.cached != want.Cached || a.output != want.Completion || want.Reasoning != mind {
		t.Fatalf("usage %+v, helper %+v", a, want)
	}
	if p != &messagesProto && a.reasoning != mind {
		t.Fatalf("reasoning tokens %d, want %d", a.reasoning, mind)
	}
}

func checkThinking(t *testing.T, p *lProto, a lAnswer, mind int64) {
	t.Helper()
	if mind == 0 {
		if a.think != "" || a.sig != "" || a.textSig != "" {
			t.Fatalf("thinking without asking: %+v", a)
		}
		return
	}
	if a.think != ThinkingText(int(mind)) {
		t.Fatalf("thinking %q", a.think)
	}
	switch p {
	case &messagesProto:
		if a.sig != Signature(p.model, a.think) {
			t.Fatalf("signature %q", a.sig)
		}
	case &responsesProto:
		if a.sig != encryptedReasoning(p.model, a.think) || !strings.HasPrefix(a.sig, "simenc_") {
			t.Fatalf("encrypted_content %q", a.sig)
		}
	case &geminiProto:
		got := a.sig // on the thought part when there is no call
		if len(a.calls) > 0 {
			got = a.calls[0].sig
			if a.sig != "" {
				t.Fatalf("signature on the thought part too: %+v", a)
			}
		}
		if got != Signature(p.model, a.think) {
			t.Fatalf("thoughtSignature %q", got)
		}
	}
}

func checkCalls(t *testing.T, p *lProto, a lAnswer, batch []lCall, seen map[string]bool, stream bool) {
	t.Helper()
	if len(a.calls) != len(batch) || a.finish != p.callFinish {
		t.Fatalf("calls %+v finish %q, want %+v", a.calls, a.finish, batch)
	}
	names := make([]string, len(batch))
	var tokens int64
	for i, c := range a.calls {
		if c.name != batch[i].name || c.args != batch[i].args {
			t.Fatalf("call %d: %+v, want %+v", i, c, batch[i])
		}
		if p.idPrefix == "" && c.id != "" || p.idPrefix != "" && (!strings.HasPrefix(c.id, p.idPrefix) || len(c.id) != len(p.idPrefix)+16 || seen[c.id]) {
			t.Fatalf("call id %q", c.id)
		}
		seen[c.id] = true
		names[i] = c.name
		tokens += Tokens(c.args) + Tokens(c.name)
	}
	if want := "Calling " + strings.Join(names, ", ") + "."; a.text != want {
		t.Fatalf("text %q, want %q", a.text, want)
	}
	mind := int64(len(strings.Fields(a.think)))
	if a.output != wantOutput(p, int64(len(strings.Fields(a.text)))+tokens, mind) {
		t.Fatalf("output %d for %q and %d call tokens", a.output, a.text, tokens)
	}
	if stream && (a.starts != len(batch) || p != &geminiProto && a.argPieces != 2*len(batch)) {
		t.Fatalf("%d call starts and %d argument pieces for %d calls", a.starts, a.argPieces, len(batch))
	}
	if stream && p == &messagesProto && mind > 0 && (a.thinkDelta != 1 || a.sigEvt != 1) {
		t.Fatalf("%d thinking deltas and %d signature deltas", a.thinkDelta, a.sigEvt)
	}
}
