//go:build unix

package config

import "golang.org/x/sys/unix"

// defaultMaxConnections is server.max_connections' default: half the
// open-file limit left after 64 descriptors for the ledger, the plugins and
// the listeners, since a relayed call holds two (the client's and the
// provider's); at least 64. Go raises the soft limit to the hard one when the
// process starts, so this follows the hard limit (ulimit -Hn).
func defaultMaxConnections() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 64
	}
	return maxConnectionsFor(lim.Cur)
}
