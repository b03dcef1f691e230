package xlate

import "encoding/json"

// chatFastChunk decodes a stream chunk into c by hand, as encoding/json
// would, without its reflection: the common members are read by chatScan,
// the rare ones (usage, error, reasoning_details, extra_content) by
// encoding/json from their bytes. c's choices are appended to, so that
// their array is reused; cache holds the last id and model, which repeat.
// false: the scan gave up or the chunk is malformed, and encoding/json
// decodes it (and says what is wrong).
func chatFastChunk(data []byte, c *chatChunkWire, cache *chatScanCache) bool {
	s := chatScan{b: data}
	var seen chatSeen
	ok := s.object(func(key []byte) bool {
		if !seen.first(key) {
			return false
		}
		var ok bool
		switch string(key) {
		case "id":
			c.ID, ok = s.cached(&cache.id)
		case "object":
			c.Object, ok = s.cached(&cache.object)
		case "model":
			c.Model, ok = s.cached(&cache.model)
		case "message":
			c.Message, ok = s.strOrNull()
		case "type":
			c.Type, ok = s.strOrNull()
		case "choices":
			ok = s.choices(c)
		case "usage":
			ok = s.unmarshal(&c.Usage)
		case "error":
			c.Error, ok = s.raw()
		default:
			ok = s.skip()
		}
		return ok
	})
	s.next()
	return ok && s.i == len(s.b)
}

// chatScanCache is the strings a stream's chunks repeat.
type chatScanCache struct{ id, object, model string }

// chatSeen is the members an object has shown, so that a repeated one
// (which encoding/json would read last-wins, merging objects) gives up,
// as does an object of more members than it holds.
type chatSeen struct {
	keys [16][]byte
	n    int
}

func (s *chatSeen) first(key []byte) bool {
	if s.n == len(s.keys) {
		return false
	}
	for _, k := range s.keys[:s.n] {
		if string(k) == string(key) {
			return false
		}
	}
	s.keys[s.n] = key
	s.n++
	return true
}

// unmarshal decodes the next value into v with encoding/json.
func (s *chatScan) unmarshal(v any) bool {
	raw, ok := s.raw()
	return ok && json.Unmarshal(raw, v) == nil
}

func (s *chatScan) choices(c *chatChunkWire) bool {
	if s.null() {
		c.Choices = nil
		return true
	}
	c.Choices = c.Choices[:0]
	return s.array(func() bool {
		c.Choices = append(c.Choices, chatChunkChoice{})
		ch := &c.Choices[len(c.Choices)-1]
		if s.null() {
			return true
		}
		var seen chatSeen
		return s.object(func(key []byte) bool {
			if !seen.first(key) {
				return false
			}
			switch string(key) {
			case "index":
				if s.null() {
					return true
				}
				var ok bool
				ch.Index, ok = s.int()
				return ok
			case "delta":
				return s.delta(&ch.Delta)
			case "finish_reason":
				if s.null() {
					ch.FinishReason = nil
					return true
				}
				r, ok := s.str()
				ch.FinishReason = &r
				return ok
			}
			return s.skip()
		})
	})
}

func (s *chatScan) delta(d *chatDeltaWire) bool {
	if s.null() {
		return true
	}
	var seen chatSeen
	return s.object(func(key []byte) bool {
		if !seen.first(key) {
			return false
		}
		var ok bool
		switch string(key) {
		case "content":
			d.Content, ok = s.strOrNull()
		case "reasoning_content":
			d.ReasoningContent, ok = s.strOrNull()
		case "reasoning":
			d.Reasoning, ok = s.strOrNull()
		case "refusal":
			d.Refusal, ok = s.strOrNull()
		case "reasoning_details":
			ok = s.unmarshal(&d.ReasoningDetails)
		case "tool_calls":
			ok = s.toolCalls(d)
		default:
			ok = s.skip()
		}
		return ok
	})
}

func (s *chatScan) toolCalls(d *chatDeltaWire) bool {
	if s.null() {
		d.ToolCalls = nil
		return true
	}
	d.ToolCalls = make([]chatToolDeltaWire, 0, 1)
	return s.array(func() bool {
		d.ToolCalls = append(d.ToolCalls, chatToolDeltaWire{})
		tc := &d.ToolCalls[len(d.ToolCalls)-1]
		if s.null() {
			return true
		}
		var seen chatSeen
		return s.object(func(key []byte) bool {
			if !seen.first(key) {
				return false
			}
			switch string(key) {
			case "index":
				if s.null() {
					tc.Index = nil
					return true
				}
				n, ok := s.int()
				tc.Index = &n
				return ok
			case "id":
				var ok bool
				tc.ID, ok = s.strOrNull()
				return ok
			case "function":
				return s.function(tc)
			case "extra_content":
				return s.unmarshal(&tc.ExtraContent)
			}
			return s.skip()
		})
	})
}

func (s *chatScan) function(tc *chatToolDeltaWire) bool {
	if s.null() {
		return true
	}
	var seen chatSeen
	return s.object(func(key []byte) bool {
		if !seen.first(key) {
			return false
		}
		var ok bool
		switch string(key) {
		case "name":
			tc.Function.Name, ok = s.strOrNull()
		case "arguments":
			tc.Function.Arguments, ok = s.strOrNull()
		default:
			ok = s.skip()
		}
		return ok
	})
}
