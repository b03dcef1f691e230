package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/store"
)

// keyCacheTTL bounds how long a key record is served from memory. Revoking a
// key through this process's admin API evicts it at once.
const keyCacheTTL = 10 * time.Second

type cachedKey struct {
	key     store.Key
	expires time.Time
}

// keyCache maps key hashes to key records.
type keyCache struct {
	mu sync.RWMutex
	m  map[string]cachedKey
}

func newKeyCache() *keyCache { return &keyCache{m: map[string]cachedKey{}} }

func (c *keyCache) get(hash string, now time.Time) (store.Key, bool) {
	c.mu.RLock()
	ck, ok := c.m[hash]
	c.mu.RUnlock()
	if !ok || now.After(ck.expires) {
		return store.Key{}, false
	}
	return ck.key, true
}

func (c *keyCache) put(k store.Key, now time.Time) {
	c.mu.Lock()
	if len(c.m) > 100_000 {
		c.m = map[string]cachedKey{}
	}
	c.m[k.Hash] = cachedKey{key: k, expires: now.Add(keyCacheTTL)}
	c.mu.Unlock()
}

// clear forgets every key (invalidations may have been missed).
func (c *keyCache) clear() {
	c.mu.Lock()
	clear(c.m)
	c.mu.Unlock()
}

func (c *keyCache) evictID(id string) {
	c.mu.Lock()
	for h, ck := range c.m {
		if ck.key.ID == id {
			delete(c.m, h)
		}
	}
	c.mu.Unlock()
}

// presentedKey extracts the API key: Bearer everywhere, x-api-key where
// allowXAPIKey (docs/api.md#authentication).
func presentedKey(r *http.Request, allowXAPIKey bool) (string, *apierr.Error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
			return "", apierr.Unauthorized("the Authorization header must be \"Bearer sk-…\"")
		}
		return strings.TrimSpace(tok), nil
	}
	if allowXAPIKey {
		if k := r.Header.Get("X-Api-Key"); k != "" {
			return strings.TrimSpace(k), nil
		}
		return "", apierr.Unauthorized("missing API key: send \"Authorization: Bearer sk-…\" or \"x-api-key: sk-…\"")
	}
	if r.Header.Get("X-Api-Key") != "" {
		return "", apierr.Unauthorized("x-api-key is accepted on /v1/messages only; send \"Authorization: Bearer sk-…\"")
	}
	return "", apierr.Unauthorized("missing API key: send \"Authorization: Bearer sk-…\"")
}

// authenticate finds the caller's key record → 401 when missing, unknown or
// revoked.
func (g *Gateway) authenticate(ctx context.Context, r *http.Request, allowXAPIKey bool, info *reqInfo) (store.Key, error) {
	raw, e := presentedKey(r, allowXAPIKey)
	if e != nil {
		return store.Key{}, e
	}
	if !strings.HasPrefix(raw, "sk-") || len(raw) < 20 || len(raw) > 200 {
		return store.Key{}, apierr.Unauthorized("invalid API key")
	}
	hash := store.HashKey(raw)
	now := g.now()
	k, ok := g.keys.get(hash, now)
	if !ok {
		var err error
		k, err = g.store.KeyByHash(ctx, hash)
		if errors.Is(err, store.ErrNotFound) {
			return store.Key{}, apierr.Unauthorized("invalid API key")
		}
		if err != nil {
			return store.Key{}, err
		}
		g.keys.put(k, now)
	}
	if k.Revoked {
		return store.Key{}, apierr.Unauthorized("this API key has been revoked")
	}
	info.keyID = k.ID
	info.account = k.Account
	if err := keyUsable(k, r, now); err != nil {
		return store.Key{}, err
	}
	return k, nil
}

// keyUsable applies the key's own settings before anything is held: an
// expired key → 401, a client address outside its allow-list → 403.
func keyUsable(k store.Key, r *http.Request, now time.Time) *apierr.Error {
	if k.ExpiredAt(now) {
		e := apierr.Unauthorized("this API key expired at %s", k.Expires.UTC().Format(time.RFC3339))
		e.Code = "key_expired"
		return e
	}
	if len(k.Allow) == 0 {
		return nil
	}
	addr := requestAddr(r)
	if !addr.IsValid() || !k.Allows(addr) {
		shown := "an unknown address"
		if addr.IsValid() {
			shown = addr.String()
		}
		e := apierr.Forbidden("this API key may not be used from %s: the address is outside the key's allow-list", shown)
		e.Code = "address_not_allowed"
		return e
	}
	return nil
}

// requestAddr is the client address a key's allow-list is checked against:
// the connection's remote address. X-Forwarded-For is not trusted (any
// client could set it), so behind a reverse proxy the proxy's address is
// the one that counts, as for clientAddr.
func requestAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
