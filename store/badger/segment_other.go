//go:build !linux

package store

import "os"

// segmentFile is a hold log segment being appended to: elsewhere than
// Linux, one write(2) per frame (segment_linux.go maps the file instead).
type segmentFile struct {
	f        *os.File
	off, max int
}

func createSegment(path string, size int) (*segmentFile, error) {
	// Not O_APPEND: Windows then withholds the right to truncate, which
	// unwrite needs.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return &segmentFile{f: f, max: size}, nil
}

func (s *segmentFile) fits(n int) bool { return s.off+n <= s.max }

func (s *segmentFile) write(frame []byte) error {
	n, err := s.f.WriteAt(frame, int64(s.off))
	s.off += n
	return err
}

// unwrite takes back the bytes from start on, of a frame whose hold was
// refused after (part of) it was written. Should the file not shrink, the
// frame stays; the caller retires the segment either way.
func (s *segmentFile) unwrite(start, _ int) {
	if s.f.Truncate(int64(start)) == nil {
		s.off = start
	}
}

func (s *segmentFile) sync() error { return s.f.Sync() }

func (s *segmentFile) close() { s.f.Close() }
