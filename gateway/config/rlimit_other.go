//go:build !unix

package config

// defaultMaxConnections is server.max_connections' default where the
// process has no open-file limit to derive it from (see rlimit_unix.go).
func defaultMaxConnections() int { return 4096 }
