package xlate

import "testing"

// The cost per event of the stream translation's two halves, on the event
// that dominates a stream: a text delta (and a tool-argument delta).

func BenchmarkMsgDecoder(b *testing.B) {
	cases := []struct{ name, data string }{
		{"text", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The greatest common divisor of 1071 and 462 is"}}`},
		{"text_escaped", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"line one\nline \"two\""}}`},
		{"text_spaced", `{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "The greatest common divisor of 1071 and 462 is"}}`},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			d := msgNewDecoder().(*msgDecoder)
			emit := func(*Event) {}
			_ = d.Event("", []byte(`{"type":"message_start","message":{"id":"msg_1","model":"m"}}`), emit)
			_ = d.Event("", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`), emit)
			data := []byte(c.data)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := d.Event("content_block_delta", data, emit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("tool_json", func(b *testing.B) {
		data := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"unit\": \"fah"}}`)
		b.ReportAllocs()
		d := msgNewDecoder().(*msgDecoder)
		emit := func(*Event) {}
		for b.Loop() {
			// A fresh tool block now and then, so that the arguments
			// kept for the end-of-block check stay small.
			if !d.open || len(d.args) > 1<<12 {
				*d = msgDecoder{args: d.args[:0]}
				_ = d.Event("", []byte(`{"type":"message_start","message":{"id":"msg_1","model":"m"}}`), emit)
				_ = d.Event("", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`), emit)
			}
			if err := d.Event("content_block_delta", data, emit); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkMsgEncoder(b *testing.B) {
	for _, c := range []struct {
		name string
		part PartType
		text string
	}{
		{"text", Text, "The greatest common divisor of 1071 and 462 is"},
		{"text_escaped", Text, "line one\nline \"two\" — ✓"},
		{"tool_json", ToolCall, `"unit": "fah`},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := msgNewEncoder(&Request{Model: "m"})
			dst := e.Encode(nil, &Event{Kind: EvStart, ID: "msg_1"})
			dst = e.Encode(dst, &Event{Kind: EvBlockStart, Part: c.part, ID: "t", Name: "f"})
			ev := &Event{Kind: EvDelta, Text: c.text}
			b.ReportAllocs()
			for b.Loop() {
				dst = e.Encode(dst[:0], ev)
			}
		})
	}
}

// BenchmarkMsgStream is one delta through the whole translation, the
// registered Stream, messages to messages.
func BenchmarkMsgStream(b *testing.B) {
	s, err := NewStream(Messages, Messages, &Request{Model: "m"})
	if err != nil {
		b.Fatal(err)
	}
	_, _ = s.Event("message_start", []byte(`{"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":25,"output_tokens":1}}}`))
	_, _ = s.Event("content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`))
	data := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The greatest common divisor of 1071 and 462 is"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Event("content_block_delta", data); err != nil {
			b.Fatal(err)
		}
	}
}
