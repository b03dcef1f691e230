package xlate

import "fmt"

// EventKind is what an Event says.
type EventKind uint8

// The stream events, in neutral form. A decoder emits, in order: one
// Start; for each content block, BlockStart, its Deltas (and Signature),
// BlockEnd — one block open at a time, numbered from 0 in order; Usage
// whenever it learns more of it; one Finish; then the stream ends. Error
// may come at any point and ends the stream.
const (
	EvStart EventKind = iota + 1
	// EvBlockStart opens block Block of type Part (Text, Thinking,
	// RedactedThinking with Text = its data, ToolCall with ID and Name
	// and Text = its Gemini thoughtSignature if any, ReasoningItem with
	// ID).
	EvBlockStart
	// EvDelta adds Text to the open block: text, thinking text, or a
	// tool call's partial arguments JSON.
	EvDelta
	// EvSignature gives the open thinking block's Signature (Text), or a
	// ReasoningItem block's encrypted content.
	EvSignature
	EvBlockEnd
	// EvUsage carries the usage known so far, whole (not an increment).
	EvUsage
	// EvFinish carries Finish and StopSequence.
	EvFinish
	// EvError: the upstream reported an error mid-stream: Name (its
	// type) and Text (its message).
	EvError
)

// Event is one neutral stream event.
type Event struct {
	Kind  EventKind
	Block int
	Part  PartType
	ID    string
	Name  string
	Model string
	Text  string
	// Finish and StopSequence (EvFinish).
	Finish       string
	StopSequence string
	Usage        Usage // EvUsage
}

// Decoder reads an upstream's stream events into neutral ones.
type Decoder interface {
	// Event decodes one SSE event (its name, "" when none, and data)
	// and calls emit for each neutral event it stands for.
	Event(name string, data []byte, emit func(*Event)) error
	// End is called when the upstream stream ended cleanly; it emits
	// what the format leaves implicit (the last block's end, Finish) or
	// returns an error when the stream ended where it cannot (inside a
	// tool call's arguments, before any Finish).
	End(emit func(*Event)) error
}

// Encoder writes neutral events as the caller's SSE events.
type Encoder interface {
	// Encode appends the SSE bytes for ev to dst.
	Encode(dst []byte, ev *Event) []byte
	// Close appends what ends the stream once the last event is written
	// (chat's "data: [DONE]"); failed says the stream ends in error, so
	// the caller's end marker that means success is left out.
	Close(dst []byte, failed bool) []byte
}

// Stream translates one upstream event stream into the caller's.
type Stream struct {
	dec    Decoder
	enc    Encoder
	out    []byte
	failed bool
	done   bool
}

// NewStream returns the translation of a stream of shape from into shape
// to, for the caller's request r.
func NewStream(from, to Shape, r *Request) (*Stream, error) {
	cf, ct := codecs[from], codecs[to]
	if cf == nil || cf.newDecoder == nil || ct == nil || ct.newEncoder == nil {
		return nil, fmt.Errorf("xlate: no translation of %s streams to %s", from, to)
	}
	return &Stream{dec: cf.newDecoder(), enc: ct.newEncoder(r)}, nil
}

func (s *Stream) emit(ev *Event) {
	if ev.Kind == EvError {
		s.failed = true
	}
	s.out = s.enc.Encode(s.out, ev)
}

// Event translates one upstream SSE event: the caller's bytes (possibly
// none) to write, valid until the next call. A malformed event is an error
// after which the stream must be ended with Fail.
func (s *Stream) Event(name string, data []byte) ([]byte, error) {
	s.out = s.out[:0]
	if s.done {
		return nil, nil
	}
	if err := s.dec.Event(name, data, s.emit); err != nil {
		return s.out, err
	}
	return s.out, nil
}

// End is the caller's last bytes once the upstream stream ended cleanly;
// an error says it ended where it cannot, and the caller's stream is then
// ended with Fail.
func (s *Stream) End() ([]byte, error) {
	s.out = s.out[:0]
	if s.done {
		return nil, nil
	}
	if err := s.dec.End(s.emit); err != nil {
		return s.out, err
	}
	s.done = true
	return s.enc.Close(s.out, s.failed), nil
}

// Fail is the caller's last bytes for a stream that cannot go on: an
// error event in the caller's shape with msg, and the end.
func (s *Stream) Fail(typ, msg string) []byte {
	s.out = s.out[:0]
	if s.done {
		return nil
	}
	s.done = true
	s.emit(&Event{Kind: EvError, Name: typ, Text: msg})
	return s.enc.Close(s.out, true)
}
