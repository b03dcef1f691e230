package badger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// # Holds
//
// A hold lives from admission to the end of its call, and every hold is
// released when its process ends: that process's calls can no longer
// settle. So holds are kept in memory, not in badger, and Hold, the one
// operation a relayed call waits for before it goes upstream, does not wait
// for badger: only the first Hold on an account in a process (and the first
// after a write of the account failed) reads the account, under its stripe.
// Per account the store keeps, in memory, the account record as
// last committed and the sum of its open holds; Balance and Hold read them,
// and Account.Held is that sum. Each writer of an account record holds the
// account's stripe from its transaction until it has put the record it
// committed in memory, so memory never shows an uncommitted balance. Hold
// takes only the account's in-memory lock, not the stripe, so it does not
// wait for a Settle in progress; it decides on the balance before that
// settle, as though it had run just before it, which is a serial order.
// Holds of one account are serialised by that lock, so none overdraws:
// Hold admits only what Available (balance − open holds) covers.
//
// So that a hold still survives a crash of its process, Hold appends it to
// the hold log before it returns: holds/<16 hex digits>.holds, segments of
// 1 MB, each frame a uvarint length, the hold record (tag 0x03, as
// hold/<id>) and its CRC-32C. On Linux a segment's blocks are allocated
// when it is created (a store into a sparse page on a full disk would be a
// SIGBUS) and it is mapped shared, and an append is a copy of about 100
// bytes into the mapping, with no system call (elsewhere it is a write(2));
// with SyncWrites an fsync follows, under the log's lock, so holds then
// take their turn for the disk as commits do. Bytes stored into a shared mapping are in
// the kernel's page cache at once, so a crash of the process loses no hold;
// a crash of the machine may lose the last ones, as it may lose badger's
// last commits. A hold ends in the ledger
// (its outcome), never in the log: a segment is deleted when it is no longer
// appended to and every hold in it has ended. A failed append refuses the
// hold. A badger key per hold would cost a write and a delete per call, in
// the tree, its log, and its compactions; this costs a sequential append.
//
// Hold does not read the ledger, so it cannot see that a request id has
// already ended; the transaction that ends the hold reads the outcome key
// and refuses such a hold with ErrExists, dropping it uncharged, and the
// ended call's records are untouched. The gateway's request ids are unique
// by construction, so no call of the gateway takes that path. A second Hold
// of an id that is open is refused with ErrExists at once.

// holdLogDir is the directory, inside the badger directory, of the hold log.
const holdLogDir = "holds"

// holdSegmentMax is the size of a hold log segment. A hold is about 100
// bytes, so a segment has some 10,000; it is deleted once every hold in it
// has ended (see holdLog.end).
const holdSegmentMax = 1 << 20

// holdSegmentExt ends the name of a segment: 16 hex digits of its number.
const holdSegmentExt = ".holds"

// errClosed is what a Hold that starts after Close returns.
var errClosed = errors.New("store: closed")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// holdLog is the write-ahead record of the holds this process has taken,
// so that a hold survives a crash of the process: the next process finds
// it and RecoverHolds resolves it (see "Holds" above). A hold is appended
// before Hold returns, one frame copied into the segment's shared mapping
// (segment_unix.go); nothing else is ever written to the log. A hold ends in the ledger (its outcome, done/<id>, is
// written with its charge or release), not in the log: a segment is deleted
// once every hold in it has ended, and the recovery of an earlier process's
// segments skips the holds whose outcome exists.
//
// A frame is a uvarint length, a hold record (tag 0x03, the layout of
// hold/<id>) of that length, and the CRC-32C of the record, 4 bytes little
// endian. A frame torn by a crash of the machine (never of the process: the
// kernel has every byte stored into the mapping) fails its length or its CRC, and
// the reader stops there. A zero where a frame's length would be is the
// unwritten rest of the segment.
type holdLog struct {
	dir        string // "" for a store in memory: nothing is written
	sync       bool   // fsync after every append (Options.SyncWrites)
	segmentMax int    // holdSegmentMax; tests lower it

	mu      sync.Mutex
	cur     *segmentFile // the segment being appended to; nil before the first hold
	seg     uint64       // its number; new segments count up from the highest found
	open    map[uint64]int
	closed  bool
	buf     []byte
	orphans []string // the segments of earlier processes, for RecoverHolds
}

// openHoldLog opens the hold log in dir (creating it) and lists the
// segments earlier processes left; it reads none of them.
func openHoldLog(dir string, sync bool) (*holdLog, error) {
	l := &holdLog{dir: dir, sync: sync, segmentMax: holdSegmentMax, open: make(map[uint64]int)}
	if dir == "" {
		return l, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: hold log: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("store: hold log: %w", err)
	}
	for _, e := range ents {
		n, ok := segmentNumber(e.Name())
		if !ok {
			continue
		}
		l.seg = max(l.seg, n) // new segments take new names
		if e.Type().IsRegular() {
			l.orphans = append(l.orphans, filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(l.orphans) // fixed-width hex names: name order is number order
	return l, nil
}

func segmentName(n uint64) string { return fmt.Sprintf("%016x%s", n, holdSegmentExt) }

func segmentNumber(name string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, holdSegmentExt)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(hex, 16, 64)
	return n, err == nil
}

// append writes the hold record rec and returns the number of the segment
// it went to, for end. It fails once the log is closed.
func (l *holdLog) append(rec []byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, errClosed
	}
	if l.dir == "" {
		l.open[0]++
		return 0, nil
	}
	b := appendFrame(l.buf[:0], rec)
	l.buf = b
	if l.cur == nil || !l.cur.fits(len(b)) {
		if err := l.rotate(len(b)); err != nil {
			return 0, err
		}
	}
	start := l.cur.off
	err := l.cur.write(b)
	if err == nil && l.sync {
		err = l.cur.sync()
	}
	if err != nil {
		// The hold is refused, so its frame must not be recovered: take it
		// back (a partial frame would also hide the frames after it), and
		// start the next hold in a new segment.
		l.cur.unwrite(start, len(b))
		l.retire()
		return 0, fmt.Errorf("store: hold log: %w", err)
	}
	l.open[l.seg]++
	return l.seg, nil
}

// appendFrame appends the frame of the record rec to b.
func appendFrame(b, rec []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(rec)))
	b = append(b, rec...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(rec, castagnoli))
}

// rotate closes the current segment and starts the next, with room for at
// least n bytes.
func (l *holdLog) rotate(n int) error {
	l.retire()
	// The number is used up even if the segment cannot be made, so a file
	// left behind by a failure never blocks the next.
	l.seg++
	path := filepath.Join(l.dir, segmentName(l.seg))
	cur, err := createSegment(path, max(l.segmentMax, n+1))
	if err != nil {
		return fmt.Errorf("store: hold log: %w", err)
	}
	if l.sync {
		if err := syncDir(l.dir); err != nil {
			cur.close()
			os.Remove(path)
			return fmt.Errorf("store: hold log: %w", err)
		}
	}
	l.cur = cur
	return nil
}

// retire closes the current segment, deleting it if none of its holds is
// open; the holds still open in it delete it when the last ends.
func (l *holdLog) retire() {
	if l.cur == nil {
		return
	}
	l.cur.close()
	l.cur = nil
	if l.open[l.seg] == 0 {
		delete(l.open, l.seg)
		os.Remove(filepath.Join(l.dir, segmentName(l.seg)))
	}
}

// end records that a hold appended to segment seg has ended (settled,
// released, or refused at its settle). A segment that is no longer appended
// to is deleted with its last open hold, outside the lock: unlinking a
// segment frees its allocated blocks, which took up to 50 ms on the
// benchmark host, and every hold taken meanwhile would have waited for it.
// No segment is made again under that number (numbers only grow), and a
// segment a crash leaves behind before its removal holds only ended holds,
// which RecoverHolds skips.
func (l *holdLog) end(seg uint64) {
	l.mu.Lock()
	n := l.open[seg] - 1
	if n > 0 {
		l.open[seg] = n
		l.mu.Unlock()
		return
	}
	delete(l.open, seg)
	remove := l.dir != "" && (l.cur == nil || seg != l.seg)
	l.mu.Unlock()
	if remove {
		os.Remove(filepath.Join(l.dir, segmentName(seg)))
	}
}

// close refuses new holds, waiting for an append in progress, and closes
// the current segment. The segments of holds still open stay for the next
// process to recover.
func (l *holdLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.retire()
}

// readOrphans reads the holds in the segments earlier processes left.
// Damaged frames are reported in torn (one message per segment) and end
// that segment's reading; the holds before them are returned.
func (l *holdLog) readOrphans() (holds []holdRec, torn []string, err error) {
	l.mu.Lock()
	orphans := slices.Clone(l.orphans)
	l.mu.Unlock()
	for _, path := range orphans {
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("store: hold log: %w", err)
		}
		hs, problem := readSegment(path, data)
		holds = append(holds, hs...)
		if problem != "" {
			torn = append(torn, problem)
		}
	}
	return holds, torn, nil
}

// readSegment decodes the frames of one segment, stopping at the first
// damaged one, which problem describes.
func readSegment(path string, data []byte) (holds []holdRec, problem string) {
	for off := 0; off < len(data); {
		if data[off] == 0 {
			// The unwritten rest of the segment, which must be all zeros:
			// after a crash of the machine, a later page of the mapping
			// may have reached the disk and an earlier one not.
			if i := slices.IndexFunc(data[off:], func(c byte) bool { return c != 0 }); i >= 0 {
				return holds, fmt.Sprintf("%s: the frames end at byte %d, but byte %d is not zero", path, off, off+i)
			}
			break
		}
		n, w := binary.Uvarint(data[off:])
		if w <= 0 || n == 0 || n > uint64(len(data)-off-w) || uint64(len(data)-off-w)-n < 4 {
			return holds, fmt.Sprintf("%s: frame at byte %d is cut short (%d bytes left)", path, off, len(data)-off)
		}
		rec := data[off+w : off+w+int(n)]
		sum := binary.LittleEndian.Uint32(data[off+w+int(n):])
		if crc32.Checksum(rec, castagnoli) != sum {
			return holds, fmt.Sprintf("%s: frame at byte %d fails its checksum", path, off)
		}
		if rec[0] != tagHoldV1 { // the log has only binary hold records
			return holds, fmt.Sprintf("%s: frame at byte %d: record is %s, want %s", path, off, tagName(rec[0]), tagName(tagHoldV1))
		}
		var hr holdRec
		if err := hr.decode([]byte(path), rec); err != nil {
			return holds, fmt.Sprintf("%s: frame at byte %d: %v", path, off, err)
		}
		holds = append(holds, hr)
		off += w + int(n) + 4
	}
	return holds, ""
}

// removeOrphans deletes the segments earlier processes left, once
// RecoverHolds has resolved their holds.
func (l *holdLog) removeOrphans() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, path := range l.orphans {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("store: hold log: %w", err)
		}
	}
	l.orphans = nil
	return nil
}

// syncDir fsyncs a directory, so that a file created in it survives a
// machine crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
