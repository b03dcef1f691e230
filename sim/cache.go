package sim

import (
	"sync"
	"time"
)

// # Prompt caching (messages)
//
// A block (in system or in a message) with cache_control
// {"type":"ephemeral", "ttl":"5m"|"1h"} is a breakpoint: the prompt prefix up
// to and including it is a cache entry, keyed by a hash of the model and
// the prefix content (text parts by type and text, other parts by their raw
// JSON). For each request the sim finds the longest prefix, ending at any
// block boundary at or before the last breakpoint, that is in the cache:
// its tokens are cache_read_input_tokens. Each breakpoint after it writes
// the tokens since the previous breakpoint (or the read prefix) as
// ephemeral_5m_input_tokens or ephemeral_1h_input_tokens by its ttl
// (default 5m); cache_creation_input_tokens is their sum. Every breakpoint
// is then stored (a read refreshes its lifetime). input_tokens is the rest:
// the tokens after the last breakpoint. There is no minimum cacheable
// length. Entries expire after their ttl; the cache holds at most 65536
// prefixes. MessagesUsage reports the first-time split (every breakpoint a
// write); a repeat of the same request reads what the first one wrote.
//
// # Prompt caching (chat and responses with prompt_cache_key)
//
// A chat or responses request with a non-empty prompt_cache_key is cached
// as a provider account caches it: each sim instance has its own cache, so
// two sims are two accounts. The prompt has a boundary at the end of each
// message (responses: after the instructions, then after the string input
// or each input item), keyed by a hash of the model, the prompt_cache_key
// and the prompt up to it. cached_tokens is the longest prefix ending at a
// boundary that this sim has seen within 5 minutes, rounded down to a
// multiple of CacheBlock, and 0 when it is under CacheMinTokens; every
// boundary is then stored (or refreshed). So the first request with a key
// reports no cached tokens, and a repeat (or a next turn extending it) of a
// prompt of at least 1024 tokens reports the prefix seen before. ChatUsage
// and ResponsesUsage report the first time (0 cached).

// Prompt-cache lifetimes of the two Anthropic TTLs.
const (
	ttl5m = int64(5 * time.Minute)
	ttl1h = int64(time.Hour)
)

// cacheShards × cacheShardMax bounds the prompt cache (65536 prefixes).
const (
	cacheShards   = 16
	cacheShardMax = 4096
)

// FNV-1a, 64 bit.
const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func fnvBytes(h uint64, s []byte) uint64 {
	for _, c := range s {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

func fnvByte(h uint64, c byte) uint64 { return (h ^ uint64(c)) * fnvPrime }

func fnvUint64(h, v uint64) uint64 {
	for i := 0; i < 8; i++ {
		h = fnvByte(h, byte(v>>(8*i)))
	}
	return h
}

// boundary is the end of one content block in prompt order: the tokens up
// to and including it, and the hash of the model and everything up to it.
type boundary struct {
	pos  int64
	hash uint64
}

// breakpoint is a block with cache_control: an index into the boundaries.
type breakpoint struct {
	at    int
	ttl1h bool
}

// prefix is a messages prompt laid out for caching.
type prefix struct {
	total  int64
	bounds []boundary
	bps    []breakpoint
}

// messagesPrefix counts a messages prompt (system blocks, then each message:
// MessageTokens plus its blocks) and, when any block carries cache_control,
// records every block boundary and breakpoint.
func messagesPrefix(req *messagesRequest) prefix {
	var p prefix
	cached := hasBreakpoint(req.System)
	for i := 0; !cached && i < len(req.Messages); i++ {
		cached = hasBreakpoint(&req.Messages[i].Content)
	}
	if !cached {
		p.total = contentTokens(req.System)
		for i := range req.Messages {
			p.total += MessageTokens + contentTokens(&req.Messages[i].Content)
		}
		return p
	}
	h := fnvString(fnvOffset, req.Model)
	block := func(pt *part) {
		h = fnvByte(h, 0x1e)
		h = fnvString(h, pt.Type)
		h = fnvByte(h, 0x1f)
		if isText(pt.Type) {
			h = fnvString(h, pt.Text)
		} else {
			h = fnvBytes(h, pt.raw)
		}
		p.total += partTokens(pt)
		p.bounds = append(p.bounds, boundary{pos: p.total, hash: h})
		if cc := pt.CacheControl; cc != nil {
			p.bps = append(p.bps, breakpoint{at: len(p.bounds) - 1, ttl1h: cc.TTL == "1h"})
		}
	}
	if req.System != nil {
		h = fnvString(fnvByte(h, 0x1d), "system")
		for i := range req.System.parts {
			block(&req.System.parts[i])
		}
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		h = fnvString(fnvByte(h, 0x1d), m.Role)
		p.total += MessageTokens
		for j := range m.Content.parts {
			block(&m.Content.parts[j])
		}
	}
	return p
}

func hasBreakpoint(c *content) bool {
	if c == nil {
		return false
	}
	for i := range c.parts {
		if c.parts[i].CacheControl != nil {
			return true
		}
	}
	return false
}

// counts splits the prompt into cache reads, cache writes and plain input.
// With a nil cache every breakpoint is a write. Otherwise the longest
// prefix ending at a block boundary at or before the last breakpoint that
// is in the cache is read; each breakpoint after it writes the tokens since
// the previous one (5m or 1h by its ttl), and is stored (or refreshed).
func (p *prefix) counts(cache *promptCache, now int64) Counts {
	var c Counts
	if len(p.bps) == 0 {
		c.Prompt = p.total
		return c
	}
	var read int64
	if cache != nil {
		for j := p.bps[len(p.bps)-1].at; j >= 0; j-- {
			if cache.hit(p.bounds[j].hash, now) {
				read = p.bounds[j].pos
				break
			}
		}
	}
	prev := read
	for _, bp := range p.bps {
		b := p.bounds[bp.at]
		if b.pos > prev {
			if bp.ttl1h {
				c.CacheWrite1h += b.pos - prev
			} else {
				c.CacheWrite += b.pos - prev
			}
			prev = b.pos
		}
		if cache != nil {
			ttl := ttl5m
			if bp.ttl1h {
				ttl = ttl1h
			}
			cache.put(b.hash, ttl, now)
		}
	}
	c.Cached = read
	c.Prompt = p.total - prev
	return c
}

// promptCache is the bounded set of cached prompt prefixes. The zero value
// is ready to use.
type promptCache struct {
	shards [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.Mutex
	m  map[uint64]cacheEntry
}

type cacheEntry struct {
	exp int64 // unix nanoseconds
	ttl int64
}

// hit reports whether h is cached and unexpired, refreshing its lifetime.
func (c *promptCache) hit(h uint64, now int64) bool {
	s := &c.shards[h%cacheShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[h]
	if !ok {
		return false
	}
	if e.exp <= now {
		delete(s.m, h)
		return false
	}
	e.exp = now + e.ttl
	s.m[h] = e
	return true
}

// put stores h for ttl (keeping the longer ttl of an existing entry),
// evicting from a full shard first.
func (c *promptCache) put(h uint64, ttl, now int64) {
	s := &c.shards[h%cacheShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[uint64]cacheEntry)
	}
	e, ok := s.m[h]
	if ok && e.ttl > ttl {
		ttl = e.ttl
	}
	if !ok && len(s.m) >= cacheShardMax {
		s.evict(now)
	}
	s.m[h] = cacheEntry{exp: now + ttl, ttl: ttl}
}

// evictSample is how many entries a full shard samples to evict.
const evictSample = 32

// evict makes room in a full shard: it samples up to evictSample entries
// (map iteration starts at a random place), deletes the expired ones and,
// when none was, the first one sampled.
func (s *cacheShard) evict(now int64) {
	n, removed := 0, false
	var first uint64
	for k, v := range s.m {
		if n == 0 {
			first = k
		}
		if v.exp <= now {
			delete(s.m, k)
			removed = true
		}
		if n++; n == evictSample {
			break
		}
	}
	if !removed {
		delete(s.m, first)
	}
}

// keyedPrefix lays out a chat or responses prompt sent with a
// prompt_cache_key for caching: a boundary at the end of each message or
// input item (responses: the instructions first), each hashed with the
// model, the key and everything before it.
type keyedPrefix struct {
	h      uint64
	pos    int64
	bounds []boundary
}

func newKeyedPrefix(model, key string) keyedPrefix {
	return keyedPrefix{h: fnvString(fnvByte(fnvString(fnvOffset, model), 0x1c), key)}
}

func (p *keyedPrefix) content(role string, c *content) {
	p.h = fnvString(fnvByte(p.h, 0x1d), role)
	if c != nil {
		for i := range c.parts {
			pt := &c.parts[i]
			p.h = fnvString(fnvByte(p.h, 0x1e), pt.Type)
			p.h = fnvByte(p.h, 0x1f)
			if isText(pt.Type) {
				p.h = fnvString(p.h, pt.Text)
			} else {
				p.h = fnvBytes(p.h, pt.raw)
			}
		}
	}
}

func (p *keyedPrefix) end(tokens int64) {
	p.pos += tokens
	p.bounds = append(p.bounds, boundary{pos: p.pos, hash: p.h})
}

func chatKeyedPrefix(req *chatRequest) keyedPrefix {
	p := newKeyedPrefix(req.Model, req.PromptCacheKey)
	for i := range req.Messages {
		m := &req.Messages[i]
		p.content(m.Role, &m.Content)
		p.end(MessageTokens + contentTokens(&m.Content))
	}
	return p
}

func responsesKeyedPrefix(req *responsesRequest) keyedPrefix {
	p := newKeyedPrefix(req.Model, req.PromptCacheKey)
	if req.Instructions != nil {
		p.h = fnvString(fnvByte(p.h, 0x1d), *req.Instructions)
		p.end(Tokens(*req.Instructions))
	}
	in := req.Input
	if in.str {
		p.h = fnvString(fnvByte(p.h, 0x1d), in.text)
		p.end(MessageTokens + Tokens(in.text))
		return p
	}
	for i := range in.items {
		it := &in.items[i]
		if it.hasContent {
			p.content(it.Role, it.Content)
			p.end(MessageTokens + contentTokens(it.Content))
		} else {
			p.h = fnvUint64(fnvByte(p.h, 0x1d), it.rawHash)
			p.end(MessageTokens + tokensN(it.rawLen))
		}
	}
	return p
}

// cached is the cached tokens of a prompt sent with a prompt_cache_key:
// the longest prefix, ending at a boundary, that this sim has seen with the
// same model and key within ttl5m, in whole CacheBlocks, and 0 when it is
// under CacheMinTokens. Every boundary is then stored (or refreshed).
func (p *keyedPrefix) cached(cache *promptCache, now int64) int64 {
	var read int64
	for j := len(p.bounds) - 1; j >= 0; j-- {
		if cache.hit(p.bounds[j].hash, now) {
			read = p.bounds[j].pos
			break
		}
	}
	for _, b := range p.bounds {
		cache.put(b.hash, ttl5m, now)
	}
	if read < CacheMinTokens {
		return 0
	}
	return read / CacheBlock * CacheBlock
}
