package xlate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func msgFuzzSeeds(f *testing.F, glob string) {
	files, _ := filepath.Glob(filepath.Join("testdata", "messages", glob))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzMsgParseRequest: no input panics or hangs; a request that reads is
// built into valid JSON (or refused with an *Invalid naming the field),
// which reads again.
func FuzzMsgParseRequest(f *testing.F) {
	msgFuzzSeeds(f, "request_*.json")
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"data:x"}}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"a":[{}]}}]}],"tools":[{"name":"f"}],"tool_choice":{"type":"tool","name":"f"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := msgParseRequest(body)
		if err != nil {
			var inv *Invalid
			var uns *Unsupported
			if !errors.As(err, &inv) && !errors.As(err, &uns) {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		built, err := msgBuildRequest(r)
		if err != nil {
			var inv *Invalid
			if !errors.As(err, &inv) {
				t.Fatalf("build error %T %v", err, err)
			}
			return
		}
		if !json.Valid(built) {
			t.Fatalf("built invalid JSON: %s", built)
		}
		if _, err := msgParseRequest(built); err != nil {
			var inv *Invalid
			if !errors.As(err, &inv) || inv.Field != "messages" {
				t.Fatalf("the built request does not read: %v\n%s", err, built)
			}
		}
	})
}

// FuzzMsgParseAnswer: no input panics; an answer that reads is written
// for a messages caller as valid JSON that reads back the same.
func FuzzMsgParseAnswer(f *testing.F) {
	msgFuzzSeeds(f, "answer_*.json")
	f.Add([]byte(`{"type":"message","content":[{"type":"tool_use","id":"t","name":"f"}],"stop_reason":"refusal","usage":{"cache_creation":{}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := msgParseAnswer(body)
		if err != nil {
			var m *ErrMalformed
			if !errors.As(err, &m) {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		out, err := msgWriteAnswer(a, &Request{Model: "m"})
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		back, err := msgParseAnswer(out)
		if err != nil {
			t.Fatalf("the written answer does not read: %v\n%s", err, out)
		}
		back.ID, back.Model = a.ID, a.Model
		if !a.HasUsage {
			back.HasUsage = false
		}
		if !reflect.DeepEqual(a, back) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", back, a)
		}
	})
}

// FuzzMsgDecoder: an upstream stream (events cut at blank lines) never
// panics the decoder; what it emits keeps the neutral stream's order, and
// a stream that decodes whole is written for a messages caller as a
// stream the SDKs accept.
func FuzzMsgDecoder(f *testing.F) {
	msgFuzzSeeds(f, "stream_*.sse")
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		evs, err := msgDecodeSSE(msgSplitSSE(stream))
		msgCheckNeutral(t, evs)
		if err != nil {
			var m *ErrMalformed
			if !errors.As(err, &m) {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		for _, ev := range evs {
			if ev.Kind == EvError {
				return
			}
		}
		msgCheckCallerStream(t, msgEncodeEvents(evs, &Request{Model: "m"}))
	})
}

// msgCheckNeutral fails unless evs keep the neutral order: one Start
// first, blocks one at a time numbered from 0, deltas and signatures only
// in the open block, one Finish, usage never negative.
func msgCheckNeutral(t *testing.T, evs []Event) {
	t.Helper()
	open, next, finishes := -1, 0, 0
	for i, ev := range evs {
		switch {
		case (i == 0) != (ev.Kind == EvStart) && ev.Kind != EvError:
			t.Fatalf("event %d: %+v", i, ev)
		case ev.Kind == EvBlockStart:
			if open != -1 || ev.Block != next {
				t.Fatalf("event %d: block %d starts with %d open", i, ev.Block, open)
			}
			open = ev.Block
		case ev.Kind == EvDelta || ev.Kind == EvSignature || ev.Kind == EvBlockEnd:
			if ev.Block != open {
				t.Fatalf("event %d: %+v outside its block (%d open)", i, ev, open)
			}
			if ev.Kind == EvBlockEnd {
				open, next = -1, next+1
			}
		case ev.Kind == EvFinish:
			if finishes++; finishes > 1 || open != -1 {
				t.Fatalf("event %d: a second finish, or one inside a block", i)
			}
		case ev.Kind == EvUsage:
			u := ev.Usage
			if u.Input < 0 || u.Output < 0 || u.CacheRead < 0 || u.CacheWrite5m < 0 || u.CacheWrite1h < 0 {
				t.Fatalf("event %d: usage %+v", i, u)
			}
		}
	}
}

// FuzzMsgFastDelta: the decoder's shortcut for deltas reads any string
// exactly as encoding/json reads it, and takes every one it can read.
func FuzzMsgFastDelta(f *testing.F) {
	for _, s := range []string{"Hello", `a\"b\\c\n`, `\ud83d\ude00`, `\ud83d x`, "\xff\xfe", `\u00zz`, `x\`, "caf\u00e9 é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, inner string) {
		data := []byte(`{"type":"content_block_delta","index":3,"delta":{"type":"thinking_delta","thinking":"` + inner + `"}}`)
		kind, index, text, ok := msgFastDelta(data)
		var w msgEventWire
		slowErr := json.Unmarshal(data, &w)
		switch {
		case ok && slowErr != nil:
			t.Fatalf("the shortcut reads %q, encoding/json fails: %v", data, slowErr)
		case !ok && slowErr == nil:
			t.Fatalf("the shortcut gives way on %q, which encoding/json reads", data)
		case ok:
			if k, s := msgDeltaOf(w.Delta); kind != k || text != s || index != *w.Index {
				t.Fatalf("%q: the shortcut reads %v %q, encoding/json %v %q", data, kind, text, k, s)
			}
		}
	})
}

// FuzzMsgAppendString: the hand-written JSON string writer reads back as
// encoding/json's does, for any bytes.
func FuzzMsgAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c\n", "\x00\x1f\u2028\xff", strings.Repeat("é", 10)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		msgCheckString(t, s)
	})
}
