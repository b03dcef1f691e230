package badger

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"syscall"
)

// segmentFile is a hold log segment being appended to. On Linux it is the
// file, with its blocks allocated up front and mapped shared: an append is a
// copy into the mapping, with no system call, and the kernel has the bytes
// as soon as they are copied, so a crash of the process loses none of them.
// The rest of the file reads as zeros, which end the frames (no frame begins
// with a zero length). Other systems write(2) each frame (segment_other.go).
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
	fail := func(err error) (*segmentFile, error) {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	// Allocate the blocks now: a store into a page of a sparse file on a
	// full disk would be a SIGBUS, not an error.
	err = syscall.Fallocate(int(f.Fd()), 0, 0, int64(size))
	for err == syscall.EINTR {
		err = syscall.Fallocate(int(f.Fd()), 0, 0, int64(size))
	}
	if err != nil {
		if !errors.Is(err, syscall.EOPNOTSUPP) && !errors.Is(err, syscall.ENOSYS) {
			return fail(fmt.Errorf("allocate %s: %w", path, err))
		}
		if _, err := f.WriteAt(make([]byte, size), 0); err != nil {
			return fail(err)
		}
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return fail(fmt.Errorf("mmap %s: %w", path, err))
	}
	return &segmentFile{f: f, m: m}, nil
}

// fits reports whether n more bytes fit.
func (s *segmentFile) fits(n int) bool { return s.off+n <= len(s.m) }

// write appends frame, which fits. The blocks are allocated, so the copy
// cannot fault; should it anyway (the file cut short under us), the fault
// is an error, not the end of the process.
func (s *segmentFile) write(frame []byte) error {
	if err := s.guard(func() { copy(s.m[s.off:], frame) }); err != nil {
		return err
	}
	s.off += len(frame)
	return nil
}

// unwrite takes back the n bytes from start on, of a frame whose hold was
// refused after (part of) it was written.
func (s *segmentFile) unwrite(start, n int) {
	_ = s.guard(func() { clear(s.m[start:min(start+n, len(s.m))]) })
	s.off = start
}

// guard runs fn, which touches the mapping, turning a memory fault into an
// error.
func (s *segmentFile) guard(fn func()) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("write to the mapped segment %s: %v", s.f.Name(), r)
		}
	}()
	fn()
	return nil
}

// sync writes the segment through to the disk: on Linux, fsync writes the
// pages stored into through a shared mapping too.
func (s *segmentFile) sync() error { return s.f.Sync() }

func (s *segmentFile) close() {
	_ = syscall.Munmap(s.m)
	s.f.Close()
}
