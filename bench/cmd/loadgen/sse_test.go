package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func readAllEvents(t testing.TB, body string) ([]string, error) {
	t.Helper()
	r := newSSEReader(strings.NewReader(body))
	var out []string
	for {
		ev, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, string(ev))
	}
}

func TestSSEReader(t *testing.T) {
	cases := []struct {
		name string
		body string
		want []string
	}{
		{"one event", "data: hello\n\n", []string{"hello"}},
		{"chat stream", "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n", []string{`{"a":1}`, `{"a":2}`, "[DONE]"}},
		{"no space after colon", "data:x\n\n", []string{"x"}},
		{"only the first space is removed", "data:  x\n\n", []string{" x"}},
		{"multi-line data joined with LF", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"event and id fields are skipped", "event: response.created\nid: 7\ndata: {}\n\n", []string{"{}"}},
		{"comments are skipped", ": keep-alive\n\ndata: x\n\n", []string{"x"}},
		{"event without data is not dispatched", "event: ping\n\ndata: y\n\n", []string{"y"}},
		{"CRLF line ends", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"CR line ends", "data: a\r\rdata: b\r\r", []string{"a", "b"}},
		{"empty data field dispatches an empty event", "data\n\n", []string{""}},
		{"unterminated last event is dropped", "data: a\n\ndata: b\n", []string{"a"}},
		{"unterminated last line is dropped", "data: a\n\ndata: b", []string{"a"}},
		{"empty body", "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readAllEvents(t, c.body)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("err = %v, want io.EOF", err)
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
				t.Fatalf("events %q, want %q", got, c.want)
			}
		})
	}
}

func TestSSEReaderOneByteReads(t *testing.T) {
	body := "data: a\r\n\r\ndata: b\n\n"
	r := newSSEReader(iotest.OneByteReader(strings.NewReader(body)))
	for _, want := range []string{"a", "b"} {
		ev, err := r.Next()
		if err != nil || string(ev) != want {
			t.Fatalf("Next = %q, %v; want %q", ev, err, want)
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v", err)
	}
}

func TestSSEReaderLimits(t *testing.T) {
	long := "data: " + strings.Repeat("x", maxEventBytes+1) + "\n\n"
	if _, err := readAllEvents(t, long); !errors.Is(err, errEventTooLarge) {
		t.Fatalf("long line: %v", err)
	}
	half := strings.Repeat("x", maxEventBytes/2+1)
	two := "data: " + half + "\ndata: " + half + "\n\n"
	if _, err := readAllEvents(t, two); !errors.Is(err, errEventTooLarge) {
		t.Fatalf("long event: %v", err)
	}
}

func TestSSEReaderPassesReadErrors(t *testing.T) {
	boom := errors.New("boom")
	r := newSSEReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)))
	if ev, err := r.Next(); err != nil || string(ev) != "a" {
		t.Fatalf("first: %q %v", ev, err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("second: %v, want boom", err)
	}
}

// FuzzSSEReader: any body ends in io.EOF or an error, never a panic, every
// event fits the limit, and splitting the reads differently changes nothing.
func FuzzSSEReader(f *testing.F) {
	f.Add("data: {\"a\":1}\n\ndata: [DONE]\n\n")
	f.Add("event: x\r\ndata: a\r\ndata: b\r\n\r\n: c\n\n")
	f.Add("data\r\r\n\ndata:\n\n")
	f.Fuzz(func(t *testing.T, body string) {
		whole, err1 := readAllEvents(t, body)
		r := newSSEReader(iotest.OneByteReader(strings.NewReader(body)))
		var split []string
		var err2 error
		for {
			ev, err := r.Next()
			if err != nil {
				err2 = err
				break
			}
			if len(ev) > maxEventBytes {
				t.Fatalf("event of %d bytes", len(ev))
			}
			split = append(split, string(ev))
		}
		if !errors.Is(err1, io.EOF) && !errors.Is(err1, errEventTooLarge) {
			t.Fatalf("unexpected error %v", err1)
		}
		if (err1 == nil) != (err2 == nil) || len(whole) != len(split) {
			t.Fatalf("whole %q (%v) vs one-byte reads %q (%v)", whole, err1, split, err2)
		}
		for i := range whole {
			if whole[i] != split[i] {
				t.Fatalf("event %d: %q vs %q", i, whole[i], split[i])
			}
		}
	})
}
