package postgres

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
)

// randomOwner names a replica: host name and 8 random bytes.
func randomOwner() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("postgres: owner id: %w", err)
	}
	host, _ := os.Hostname()
	if len(host) > 64 {
		host = host[:64]
	}
	return host + "-" + hex.EncodeToString(b[:]), nil
}
