package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readEvents reads every event of stream, the last one as Next ends it.
func readEvents(t *testing.T, r io.Reader) (events [][]byte, rest []byte, err error) {
	t.Helper()
	rd := NewEventReader(r)
	for {
		ev, err := rd.Next()
		if err != nil {
			return events, append([]byte(nil), ev...), err
		}
		events = append(events, append([]byte(nil), ev...))
	}
}

func TestEventReader(t *testing.T) {
	long := "data: " + strings.Repeat("x", 10<<10)
	stream := "event: a\r\ndata: 1\r\n\r\n\n" + long + "\n\ndata: cut"
	events, rest, err := readEvents(t, strings.NewReader(stream))
	want := []string{"event: a\r\ndata: 1\r\n\r\n", "\n", long + "\n\n"}
	if !errors.Is(err, io.EOF) || string(rest) != "data: cut" || len(events) != len(want) {
		t.Fatalf("%d events, rest %q, %v", len(events), rest, err)
	}
	for i, w := range want {
		if string(events[i]) != w {
			t.Errorf("event %d = %.40q, want %.40q", i, events[i], w)
		}
	}
	_, rest, err = readEvents(t, iotest.TimeoutReader(strings.NewReader("data: 1\n\ndata: 2\n")))
	if errors.Is(err, io.EOF) || err == nil || string(rest) != "data: 2\n" {
		t.Fatalf("a read error: rest %q, %v", rest, err)
	}
}

// FuzzEventReader: the events Next returns, then what it returns at the
// end, are the stream byte for byte, and each event ends with its blank
// line.
func FuzzEventReader(f *testing.F) {
	f.Add([]byte("data: {\"x\":1}\n\nevent: e\r\ndata: y\r\n\r\n"))
	f.Add([]byte("\n\n\r\n: c\n\ndata: tail"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		events, rest, err := readEvents(t, iotest.HalfReader(bytes.NewReader(stream)))
		if !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		var all []byte
		for _, ev := range events {
			last := ev[bytes.LastIndexByte(ev[:len(ev)-1], '\n')+1:] // its last line
			if string(last) != "\n" && string(last) != "\r\n" {
				t.Fatalf("event %q does not end with a blank line", ev)
			}
			all = append(all, ev...)
		}
		if all = append(all, rest...); !bytes.Equal(all, stream) {
			t.Fatalf("events %q + %q are not the stream %q", events, rest, stream)
		}
	})
}
