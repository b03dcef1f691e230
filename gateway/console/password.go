package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// argon2id parameters: OWASP's first recommended set (19 MiB, 2 passes, one
// lane), about 30 ms on one core. Hashes carry their parameters, so they
// can be raised later without invalidating stored passwords.
const (
	kdfMemory  = 19 * 1024 // KiB
	kdfTime    = 2
	kdfThreads = 1
	kdfSaltLen = 16
	kdfKeyLen  = 32

	minPassword = 12  // characters
	maxPassword = 256 // bytes
)

var b64 = base64.RawStdEncoding

// dummyHash is verified against when the email is unknown, so that an
// unknown login costs the same KDF run as a wrong password.
var dummyHash = func() string {
	h, err := hashPassword("not a password anyone has")
	if err != nil {
		panic(err)
	}
	return h
}()

// kdf bounds concurrent KDF runs: each holds kdfMemory of RAM, so a burst
// of sign-ins waits here instead of growing the heap without limit.
type kdf chan struct{}

func newKDF(n int) kdf { return make(kdf, max(n, 1)) }

func (k kdf) acquire(ctx context.Context) error {
	select {
	case k <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (k kdf) release() { <-k }

// checkPassword says what is wrong with a new password, or nil.
func checkPassword(pw, again string) error {
	switch {
	case pw != again:
		return errors.New("the two passwords differ")
	case len(pw) > maxPassword:
		return fmt.Errorf("the password is longer than %d bytes", maxPassword)
	case !utf8.ValidString(pw):
		return errors.New("the password is not valid UTF-8 text")
	case utf8.RuneCountInString(pw) < minPassword:
		return fmt.Errorf("the password must be at least %d characters", minPassword)
	}
	return nil
}

// hashPassword returns the PHC string
// $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>.
func hashPassword(pw string) (string, error) {
	salt := make([]byte, kdfSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	sum := argon2.IDKey([]byte(pw), salt, kdfTime, kdfMemory, kdfThreads, kdfKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, kdfMemory, kdfTime, kdfThreads,
		b64.EncodeToString(salt), b64.EncodeToString(sum)), nil
}

// errHash is a stored hash that cannot be read.
var errHash = errors.New("console: unreadable password hash")

// verifyPassword compares pw with a PHC argon2id string in constant time.
// It refuses parameters beyond what the console would set (a tampered
// row must not make one sign-in take a gigabyte).
func verifyPassword(pw, phc string) (bool, error) {
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return false, errHash
	}
	var v int
	var m uint32
	var t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return false, errHash
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil ||
		m < 8 || m > 256*1024 || t < 1 || t > 16 || p < 1 || p > 16 {
		return false, errHash
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return false, errHash
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) < 16 || len(want) > 64 {
		return false, errHash
	}
	got := argon2.IDKey([]byte(pw), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}
