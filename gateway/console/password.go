package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// argon2id parameters: OWASP's first recommended set (19 MiB, 2 passes, one
// lane): 19 MiB and about 80 ms per run on one core of the 2-core test
// machine (BenchmarkHashPassword). Hashes carry their parameters, so they
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
// unknown login costs the same KDF run as a wrong password. It is made at
// the first sign-in, not at package init: a KDF run (about 80 ms and 19 MiB)
// in every binary that links the console would be paid by each start.
var dummyHash = sync.OnceValue(func() string {
	h, err := hashPassword("not a password anyone has")
	if err != nil {
		panic(err)
	}
	return h
})

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

// phc is a parsed argon2id PHC string.
type phc struct {
	memory, time uint32
	threads      uint8
	salt, hash   []byte
}

// parsePHC reads $argon2id$v=19$m=…,t=…,p=…$salt$hash. It refuses
// parameters beyond what the console would set (a tampered row must not
// make one sign-in take a gigabyte) and other versions.
func parsePHC(s string) (phc, error) {
	var p phc
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != "v=19" {
		return p, errHash
	}
	var m, t, th uint64
	params := strings.Split(parts[3], ",")
	if len(params) != 3 {
		return p, errHash
	}
	for i, kv := range []struct {
		key string
		v   *uint64
		max uint64
	}{{"m=", &m, 256 * 1024}, {"t=", &t, 16}, {"p=", &th, 16}} {
		num, ok := strings.CutPrefix(params[i], kv.key)
		n, err := strconv.ParseUint(num, 10, 32)
		if !ok || err != nil || n < 1 || n > kv.max {
			return p, errHash
		}
		*kv.v = n
	}
	if m < 8*th {
		return p, errHash
	}
	var err error
	if p.salt, err = b64.DecodeString(parts[4]); err != nil || len(p.salt) < 8 || len(p.salt) > 64 {
		return p, errHash
	}
	if p.hash, err = b64.DecodeString(parts[5]); err != nil || len(p.hash) < 16 || len(p.hash) > 64 {
		return p, errHash
	}
	p.memory, p.time, p.threads = uint32(m), uint32(t), uint8(th)
	return p, nil
}

// verifyPassword compares pw with a PHC argon2id string in constant time.
func verifyPassword(pw, s string) (bool, error) {
	p, err := parsePHC(s)
	if err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(pw), p.salt, p.time, p.memory, p.threads, uint32(len(p.hash)))
	return subtle.ConstantTimeCompare(got, p.hash) == 1, nil
}
