package main

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// logSink buffers log output and writes it to w when the buffer fills and
// at least every interval, so that a busy gateway makes one write system
// call per few dozen access-log lines instead of one per request. What a
// crash can lose is at most one interval of log lines: logs carry no money
// and no content (the ledger is written by the store, not logged).
type logSink struct {
	mu     sync.Mutex
	buf    *bufio.Writer
	stop   chan struct{}
	done   chan struct{}
	closed bool
}

func newLogSink(w io.Writer, interval time.Duration) *logSink {
	s := &logSink{buf: bufio.NewWriterSize(w, 32<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go s.flushEvery(interval)
	return s
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.buf.Write(p)
	if s.closed && err == nil {
		err = s.buf.Flush() // after Close nothing flushes in the background
	}
	return n, err
}

func (s *logSink) flushEvery(interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.Flush()
		case <-s.stop:
			return
		}
	}
}

// Flush writes what is buffered.
func (s *logSink) Flush() {
	s.mu.Lock()
	_ = s.buf.Flush()
	s.mu.Unlock()
}

// Close stops the background flush and flushes; later writes go straight
// through. It is safe to call more than once.
func (s *logSink) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	s.Flush()
}
