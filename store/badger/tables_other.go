//go:build !linux

package store

// releaseTables is Linux only (tables_linux.go).
func (b *Store) releaseTables(string, map[uint64]bool, func([]tableRange)) (int64, error) {
	return 0, errReleaseUnsupported
}
