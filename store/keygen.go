package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Shapes of generated keys.
const (
	KeyPrefix   = "sk-"  // every plaintext key starts with it
	KeyIDPrefix = "key_" // every key id starts with it
	keyChars    = 48     // base62 characters after KeyPrefix (≈285 bits)
	keyIDChars  = 12     // base62 characters after KeyIDPrefix
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewKey makes a new API key: plaintext is "sk-" and 48 base62 characters
// from crypto/rand, shown to the operator once and never stored; id is
// "key_" and 12 base62 characters, the public name safe for logs; hash is
// HashKey(plaintext), what the store keeps.
func NewKey() (plaintext, id, hash string, err error) {
	secret, err := randomBase62(keyChars)
	if err != nil {
		return "", "", "", fmt.Errorf("store: new key: %w", err)
	}
	idPart, err := randomBase62(keyIDChars)
	if err != nil {
		return "", "", "", fmt.Errorf("store: new key id: %w", err)
	}
	plaintext = KeyPrefix + secret
	return plaintext, KeyIDPrefix + idPart, HashKey(plaintext), nil
}

// HashKey is the lowercase hex SHA-256 of a plaintext key, the form keys are
// stored and looked up in.
func HashKey(plaintext string) string {
	sum := sha256.Sum256([]byte(plaintext))
	return hex.EncodeToString(sum[:])
}

// randomBase62 draws n uniform base62 characters from crypto/rand, rejecting
// bytes ≥ 248 so that every character is equally likely.
func randomBase62(n int) (string, error) {
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/4+8)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", err
		}
		for _, c := range buf {
			if c >= 248 { // 248 = 4 × 62
				continue
			}
			out = append(out, base62[c%62])
			if len(out) == n {
				break
			}
		}
	}
	return string(out), nil
}
