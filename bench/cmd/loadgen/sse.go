package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// maxEventBytes bounds one server-sent event (its data lines together).
const maxEventBytes = 1 << 20

// errEventTooLarge is returned when an event exceeds maxEventBytes.
var errEventTooLarge = errors.New("sse: event larger than 1 MiB")

// sseReader splits a text/event-stream body into events (WHATWG HTML,
// "Server-sent events", interpreting an event stream): lines end in LF, CR
// or CRLF; a blank line dispatches the event; "data" fields are joined with
// LF; comments (lines starting with ':') and other fields are skipped. Only
// the data is kept: the benchmark needs to know when an event arrived and
// whether it is the final "[DONE]".
type sseReader struct {
	r       *bufio.Reader
	data    []byte
	buf     []byte // the current line, reused
	hasData bool
	lastCR  bool // the previous line ended in CR: a following LF is its end
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 16<<10)}
}

// Next returns the data of the next event that has data. The slice is valid
// until the next call. At the end of the body it returns io.EOF; an event
// cut by the end of the body is dropped, as the specification says.
func (s *sseReader) Next() ([]byte, error) {
	s.data = s.data[:0]
	s.hasData = false
	for {
		line, err := s.line()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if s.hasData {
				return s.data, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := bytes.Cut(line, []byte{':'})
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		if string(field) != "data" {
			continue
		}
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		if len(s.data)+len(value) > maxEventBytes {
			return nil, errEventTooLarge
		}
		s.data = append(s.data, value...)
		s.hasData = true
	}
}

// line returns the next line without its terminator. A final line without
// a terminator is not a complete line: io.EOF.
func (s *sseReader) line() ([]byte, error) {
	buf := s.buf[:0]
	defer func() { s.buf = buf[:0] }()
	for {
		b, err := s.r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, err
		}
		if b == '\n' && s.lastCR && len(buf) == 0 {
			s.lastCR = false
			continue // the LF of a CRLF
		}
		s.lastCR = false
		switch b {
		case '\n':
			return buf, nil
		case '\r':
			s.lastCR = true
			return buf, nil
		}
		if len(buf) >= maxEventBytes {
			return nil, errEventTooLarge
		}
		buf = append(buf, b)
	}
}
