package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// ParseEvent returns the event name and data of one raw SSE event (data
// lines joined by "\n"); data is nil when the event has no data line.
func ParseEvent(ev []byte) (name, data []byte) {
	dataLines := 0
	var joined []byte
	for len(ev) > 0 {
		var ln []byte
		ln, ev, _ = bytes.Cut(ev, []byte("\n"))
		ln = bytes.TrimSuffix(ln, []byte("\r"))
		switch {
		case bytes.HasPrefix(ln, []byte("data:")):
			v := ln[5:]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			dataLines++
			if dataLines == 1 {
				data = v
			} else {
				if dataLines == 2 {
					joined = append(joined, data...)
				}
				joined = append(append(joined, '\n'), v...)
				data = joined
			}
		case bytes.HasPrefix(ln, []byte("event:")):
			name = bytes.TrimSpace(ln[6:])
		}
	}
	if dataLines > 0 && data == nil {
		data = []byte{}
	}
	return name, data
}

// rebuildData replaces the data of a single-data-line event, keeping the
// other lines as they were.
func rebuildData(ev, data []byte) []byte {
	var out []byte
	for len(ev) > 0 {
		end := bytes.IndexByte(ev, '\n') + 1 // the line with its newline
		if end == 0 {
			end = len(ev)
		}
		ln := ev[:end]
		ev = ev[end:]
		if bytes.HasPrefix(ln, []byte("data:")) {
			out = append(out, "data: "...)
			out = append(out, data...)
			if bytes.HasSuffix(ln, []byte("\r\n")) {
				out = append(out, '\r', '\n')
			} else if bytes.HasSuffix(ln, []byte("\n")) {
				out = append(out, '\n')
			}
			continue
		}
		out = append(out, ln...)
	}
	return out
}

// usageNull matches the "usage":null member that include_usage adds to every
// chunk; it can only appear as a key (string content escapes its quotes).
var usageNullForms = [][]byte{[]byte(`,"usage":null`), []byte(`, "usage": null`), []byte(`,"usage": null`), []byte(`"usage":null,`), []byte(`"usage": null, `)}

// stripUsageNull removes the "usage":null member from a chunk's data.
func stripUsageNull(data []byte) []byte {
	for _, f := range usageNullForms {
		if i := bytes.Index(data, f); i >= 0 {
			out := make([]byte, 0, len(data)-len(f))
			out = append(out, data[:i]...)
			return append(out, data[i+len(f):]...)
		}
	}
	return data
}

// StripChatUsage returns the chat-completions stream event ev (its data
// is data, from ParseEvent) as the client would have had it from the
// provider had the gateway not asked for usage (ForceIncludeUsage): drop is
// true for the usage-only chunk (IsChatUsageOnlyChunk), and otherwise the
// "usage":null member include_usage adds to every chunk is removed.
func StripChatUsage(ev, data []byte) (out []byte, drop bool) {
	if IsChatUsageOnlyChunk(data) {
		return nil, true
	}
	if bytes.Contains(data, []byte(`"usage"`)) {
		return rebuildData(ev, stripUsageNull(data)), false
	}
	return ev, false
}

// An EventReader reads a server-sent event stream event by event, each as
// the raw bytes it came in (its lines and the blank line that ends it), so
// that a relay passes it on unchanged. Lines longer than its buffer
// accumulate.
type EventReader struct {
	rd *bufio.Reader
	ev []byte // the raw bytes of the event being read
}

// NewEventReader returns an EventReader reading r.
func NewEventReader(r io.Reader) *EventReader {
	return &EventReader{rd: bufio.NewReaderSize(r, 4<<10)}
}

// Next returns the next event, ended by its blank line ("\n" or "\r\n"; a
// lone blank line is an event of its own). At the end of the stream it
// returns what was read of an unended event (possibly nothing or only white
// space) with io.EOF, or with the read error that cut the stream. The
// bytes are valid until the next call.
func (r *EventReader) Next() ([]byte, error) {
	r.ev = r.ev[:0]
	for {
		line, err := r.rd.ReadSlice('\n')
		r.ev = append(r.ev, line...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return r.ev, err
		}
		if len(line) == 1 || (len(line) == 2 && line[0] == '\r') { // blank line: end of event
			return r.ev, nil
		}
	}
}
