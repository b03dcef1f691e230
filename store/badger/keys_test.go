package badger

import (
	"bytes"
	"context"
	"errors"
	"github.com/modelrelay/modelrelay/store"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestNewKey(t *testing.T) {
	t.Parallel()
	plainRE := regexp.MustCompile(`^sk-[0-9A-Za-z]{48}$`)
	idRE := regexp.MustCompile(`^key_[0-9A-Za-z]{12}$`)
	hashRE := regexp.MustCompile(`^[0-9a-f]{64}$`)
	seen := map[string]bool{}
	counts := map[rune]int{}
	for range 500 {
		plain, id, hash, err := store.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		if !plainRE.MatchString(plain) || !idRE.MatchString(id) || !hashRE.MatchString(hash) {
			t.Fatalf("bad shapes: %q %q %q", plain, id, hash)
		}
		if hash != store.HashKey(plain) {
			t.Fatalf("hash %s is not HashKey of the plaintext", hash)
		}
		if seen[plain] || seen[id] {
			t.Fatalf("repeated key or id: %s %s", plain, id)
		}
		seen[plain], seen[id] = true, true
		for _, r := range plain[3:] {
			counts[r]++
		}
	}
	// 24000 draws over 62 characters: each appears about 387 times; every
	// character must appear, and none absurdly often.
	if len(counts) != 62 {
		t.Errorf("%d distinct characters drawn, want 62", len(counts))
	}
	for r, n := range counts {
		if n < 250 || n > 550 {
			t.Errorf("character %q drawn %d times of 24000", r, n)
		}
	}
	if got := store.HashKey("sk-test"); got != "f3abf2a6cc4f00987743db5f544ba345b4899ae31f326d8ee9c4816de153c9e0" { // sha256sum of "sk-test"
		t.Errorf("HashKey: %q", got)
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	plain1, k1, k2, k3 := seedKeys(t, b)

	t.Run("refused", func(t *testing.T) { checkKeysRefused(t, b, plain1, k1) })
	t.Run("KeyByHash", func(t *testing.T) {
		got, err := b.KeyByHash(ctx, store.HashKey(plain1))
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != k1.ID || got.Account != "acme" || got.Route != store.AutoRoute || got.Revoked || got.Created.IsZero() {
			t.Errorf("KeyByHash: %+v", got)
		}
		for _, h := range []string{store.HashKey("unknown"), "", plain1} {
			if _, err := b.KeyByHash(ctx, h); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("KeyByHash(%q): %v, want ErrNotFound", h, err)
			}
		}
	})
	t.Run("ListKeys", func(t *testing.T) { checkListKeys(t, b, k1.ID, k2.ID, k3.ID) })
	t.Run("RevokeKey", func(t *testing.T) {
		revoked, err := b.RevokeKey(ctx, k2.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !revoked.Revoked || revoked.ID != k2.ID || len(revoked.Exclude) != 1 {
			t.Errorf("RevokeKey: %+v", revoked)
		}
		if again, err := b.RevokeKey(ctx, k2.ID); err != nil || !again.Revoked {
			t.Errorf("revoking twice: %+v, %v", again, err)
		}
		if _, err := b.RevokeKey(ctx, "key_unknown"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("RevokeKey of an unknown id: %v", err)
		}
	})

	// Everything survives a reopen.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openAt(t, dir, "", false)
	if k, err := b.KeyByHash(ctx, k2.Hash); err != nil || !k.Revoked || k.Exclude[0] != "big-model" {
		t.Errorf("after reopen: %+v, %v", k, err)
	}
	if k, err := b.KeyByHash(ctx, k1.Hash); err != nil || k.Revoked {
		t.Errorf("after reopen: %+v, %v", k, err)
	}
}

// seedKeys creates the accounts acme and beta and three keys: two of acme's
// (the second with a model excluded) and one of beta's. It returns the first
// key's plaintext and the keys.
func seedKeys(t *testing.T, b *Store) (plain1 string, k1, k2, k3 store.Key) {
	t.Helper()
	ctx := context.Background()
	for _, a := range []string{"acme", "beta"} {
		if _, err := b.CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	plain1, id1, hash1, _ := store.NewKey()
	_, id2, hash2, _ := store.NewKey()
	_, id3, hash3, _ := store.NewKey()
	k1 = store.Key{ID: id1, Hash: hash1, Account: "acme", Route: store.AutoRoute}
	k2 = store.Key{ID: id2, Hash: hash2, Account: "acme", Route: "budget", Exclude: []string{"big-model"}}
	k3 = store.Key{ID: id3, Hash: hash3, Account: "beta", Route: "budget"}
	for _, k := range []store.Key{k1, k2, k3} {
		if err := b.CreateKey(ctx, k); err != nil {
			t.Fatalf("CreateKey %s: %v", k.ID, err)
		}
	}
	return plain1, k1, k2, k3
}

// checkKeysRefused wants CreateKey to refuse a key that repeats k1's hash or
// id, names an unknown account or is malformed, naming what is wrong.
func checkKeysRefused(t *testing.T, b *Store, plain1 string, k1 store.Key) {
	refused := []struct {
		name    string
		key     store.Key
		wantErr error
		wantMsg string
	}{
		{"duplicate hash", store.Key{ID: "key_other", Hash: k1.Hash, Account: "acme", Route: "r"}, store.ErrExists, "hash"},
		{"duplicate id", store.Key{ID: k1.ID, Hash: store.HashKey("x"), Account: "acme", Route: "r"}, store.ErrExists, "id"},
		{"unknown account", store.Key{ID: "key_x", Hash: store.HashKey("y"), Account: "nobody", Route: "r"}, store.ErrNotFound, "nobody"},
		{"plaintext as hash", store.Key{ID: "key_x", Hash: plain1, Account: "acme", Route: "r"}, nil, "key hash is 51 characters"},
		{"uppercase hash", store.Key{ID: "key_x", Hash: strings.ToUpper(store.HashKey("z")), Account: "acme", Route: "r"}, nil, "not lowercase hex"},
		{"empty route", store.Key{ID: "key_x", Hash: store.HashKey("w"), Account: "acme"}, nil, "route is empty"},
		{"empty id", store.Key{Hash: store.HashKey("v"), Account: "acme", Route: "r"}, nil, "key id is empty"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			err := b.CreateKey(context.Background(), tc.key)
			if err == nil {
				t.Fatal("CreateKey succeeded")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("CreateKey: %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("CreateKey error %q does not name %q", err, tc.wantMsg)
			}
		})
	}
}

// checkListKeys wants ListKeys to list each account's keys, every key for
// the empty account, and ErrNotFound for an unknown account.
func checkListKeys(t *testing.T, b *Store, id1, id2, id3 string) {
	lists := []struct {
		account string
		want    []string
	}{
		{"acme", []string{id1, id2}},
		{"beta", []string{id3}},
		{"", []string{id1, id2, id3}},
	}
	for _, tc := range lists {
		keys, err := b.ListKeys(context.Background(), tc.account)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, k := range keys {
			ids = append(ids, k.ID)
		}
		if strings.Join(ids, ",") != strings.Join(tc.want, ",") {
			t.Errorf("ListKeys(%q) = %v, want %v", tc.account, ids, tc.want)
		}
	}
	if _, err := b.ListKeys(context.Background(), "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ListKeys of an unknown account: %v", err)
	}
}

// No plaintext key reaches the disk. The canary, written only in a hold's
// model field, proves that the scan sees what the store writes: badger
// compresses table blocks with Snappy, which stores the first occurrence of
// a string literally unless parts of it repeat earlier text, so the canary
// shares no four bytes with anything else the test writes. The scan runs
// twice: with the store open (the write-ahead log, never compressed) and
// after Close (the tables). It looks for every 16-character window of the
// key's secret, not only the whole key.
func TestNoPlaintextOnDisk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := Open(dir, Options{SyncWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, id, hash, err := store.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	const canary = "QJZW-kx7v8pmY3"
	credit(t, b, "acme", usd)
	if err := b.CreateKey(ctx, store.Key{ID: id, Hash: hash, Account: "acme", Route: store.AutoRoute}); err != nil {
		t.Fatal(err)
	}
	if err := b.Hold(ctx, store.Hold{RequestID: "req_1", Account: "acme", KeyID: id, Model: canary, Amount: 1}); err != nil {
		t.Fatal(err)
	}
	var needles [][]byte
	for i := len(store.KeyPrefix); i+16 <= len(plain); i++ {
		needles = append(needles, []byte(plain[i:i+16]))
	}
	scan := func(when string) {
		var files int
		var sawCanary bool
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			files++
			found, err := scanFile(path, append([][]byte{[]byte(canary)}, needles...))
			if err != nil {
				return err
			}
			if found[0] {
				sawCanary = true
			}
			for i, f := range found[1:] {
				if f {
					t.Errorf("%s: %s holds part of the plaintext key (%s)", when, path, needles[i])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if files == 0 || !sawCanary {
			t.Fatalf("%s: the scan of %d files did not find the canary: it cannot prove anything", when, files)
		}
	}
	scan("open")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	scan("closed")
}

// scanFile reports which needles occur in the file, reading it in chunks
// (badger preallocates large sparse files) with an overlap so that a needle
// across two chunks is found.
func scanFile(path string, needles [][]byte) ([]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	overlap := 0
	for _, n := range needles {
		overlap = max(overlap, len(n)-1)
	}
	found := make([]bool, len(needles))
	buf := make([]byte, overlap+1<<20)
	kept := 0
	for {
		n, err := io.ReadFull(f, buf[kept:])
		window := buf[:kept+n]
		for i, needle := range needles {
			found[i] = found[i] || bytes.Contains(window, needle)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return found, nil
		}
		if err != nil {
			return nil, err
		}
		kept = copy(buf, window[len(window)-overlap:])
	}
}
