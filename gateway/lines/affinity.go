package lines

import (
	"hash/maphash"
	"net/http"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/modelrelay/modelrelay/wire"
)

// convSeed keys the hash affinityKey mixes into a conversation's hash
// (wire.ConversationHash): it means nothing outside this process.
var convSeed = maphash.MakeSeed()

// conversationHeaders name the request headers that carry a conversation
// identity, in the order they are read: Codex's session_id, then Claude
// Code's x-claude-code-session-id. They are in canonical form, as the
// server stores them, so the lookup allocates nothing.
var conversationHeaders = []string{"Session_id", "X-Claude-Code-Session-Id"}

// Conversation is the hash of a call's conversation identity: body, the
// one its body carries (wire.ConversationHash, 0: none), else the first
// conversation header of h; 0 when it has none.
func Conversation(body uint64, h http.Header) uint64 {
	if body != 0 {
		return body
	}
	for _, name := range conversationHeaders {
		if vs := h[name]; len(vs) > 0 && vs[0] != "" {
			return wire.ConversationHash(&vs[0])
		}
	}
	return 0
}

// affinity remembers, per conversation, the line that last answered it: a
// bounded map with expiry, sharded so that calls of different
// conversations do not contend. Its key is the conversation's hash mixed
// with the call's route and model, so one conversation moving to another
// model or route starts afresh.
type affinity struct {
	ttl    int64 // nanoseconds
	shards [affinityShards]affinityShard
}

const (
	affinityShards = 16
	// affinityMax bounds the conversations remembered (about 4 MB).
	affinityMax      = 100_000
	affinityShardMax = affinityMax / affinityShards
	// affinitySample is how many entries a full shard samples to evict.
	affinitySample = 32
)

type affinityShard struct {
	mu sync.Mutex
	m  map[uint64]affinityEntry
}

type affinityEntry struct {
	l   *Line
	exp int64 // UnixNano
}

// newAffinity returns an affinity remembering a line for ttl; nil (no
// affinity) when ttl is negative.
func newAffinity(ttl time.Duration) *affinity {
	if ttl < 0 {
		return nil
	}
	return &affinity{ttl: int64(ttl)}
}

// affinityKey mixes a conversation hash with the call's route and model.
func affinityKey(conv uint64, route, model string) uint64 {
	var h maphash.Hash
	h.SetSeed(convSeed)
	h.WriteString(route)
	h.WriteByte(0)
	h.WriteString(model)
	return max(conv^h.Sum64(), 1)
}

func (a *affinity) shard(k uint64) *affinityShard { return &a.shards[k%affinityShards] }

// get returns the line remembered for k, or nil.
func (a *affinity) get(k uint64, now time.Time) *Line {
	s := a.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[k]
	if !ok {
		return nil
	}
	if e.exp <= now.UnixNano() {
		delete(s.m, k)
		return nil
	}
	return e.l
}

// put remembers l for k until ttl from now, evicting from a full shard
// first: expired entries among a sample, else one sampled entry.
func (a *affinity) put(k uint64, l *Line, now time.Time) {
	s := a.shard(k)
	t := now.UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[uint64]affinityEntry)
	}
	if _, ok := s.m[k]; !ok && len(s.m) >= affinityShardMax {
		n, removed := 0, false
		var first uint64
		for kk, e := range s.m { // map iteration starts at a random place
			if n == 0 {
				first = kk
			}
			if e.exp <= t {
				delete(s.m, kk)
				removed = true
			}
			if n++; n == affinitySample {
				break
			}
		}
		if !removed {
			delete(s.m, first)
		}
	}
	s.m[k] = affinityEntry{l: l, exp: t + a.ttl}
}

// forget drops what is remembered for k.
func (a *affinity) forget(k uint64) {
	s := a.shard(k)
	s.mu.Lock()
	delete(s.m, k)
	s.mu.Unlock()
}

// len is the number of conversations remembered (expired ones included
// until they are found or evicted).
func (a *affinity) len() int {
	n := 0
	for i := range a.shards {
		s := &a.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// prefer returns plan with l moved to its front when l is in it and its
// breaker is not open; else plan unchanged. plan is not modified.
func prefer(plan []*Line, l *Line) []*Line {
	i := -1
	for j, x := range plan {
		if x == l {
			i = j
			break
		}
	}
	if i <= 0 || l.breaker.State() == gobreaker.StateOpen {
		return plan
	}
	out := make([]*Line, 0, len(plan))
	out = append(out, l)
	out = append(out, plan[:i]...)
	return append(out, plan[i+1:]...)
}
