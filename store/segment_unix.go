//go:build unix

package store

import (
	"fmt"
	"os"
	"syscall"
)

// segmentFile is a hold log segment being appended to. On unix it is the
// file, sized up front and mapped shared: an append is a copy into the
// mapping, with no system call, and the kernel has the bytes as soon as
// they are copied, so a crash of the process loses none of them. The rest
// of the file reads as zeros, which end the frames (no frame begins with a
// zero length).
type segmentFile struct {
	f   *os.File
	m   []byte
	off int
}

func createSegment(path string, size int) (*segmentFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return &segmentFile{f: f, m: m}, nil
}

// fits reports whether n more bytes fit.
func (s *segmentFile) fits(n int) bool { return s.off+n <= len(s.m) }

// write appends frame, which fits.
func (s *segmentFile) write(frame []byte) error {
	s.off += copy(s.m[s.off:], frame)
	return nil
}

// sync writes the segment through to the disk (fsync covers the pages
// written through the mapping).
func (s *segmentFile) sync() error { return s.f.Sync() }

func (s *segmentFile) close() {
	_ = syscall.Munmap(s.m)
	s.f.Close()
}
