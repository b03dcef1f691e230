package pricing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// member is one key and value of a JSON object, in document order.
type member struct {
	key   string
	value json.RawMessage
}

// decodeObject splits a JSON object into its members; duplicate keys are an
// error. raw must be valid JSON. On error it also returns the members read
// before the fault.
func decodeObject(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("must be an object, not %s", kind(raw))
	}
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return members, errors.New("malformed object")
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return members, at(key, errors.New("malformed value"))
		}
		for _, m := range members {
			if m.key == key {
				return members, at(key, errors.New("duplicate key"))
			}
		}
		members = append(members, member{key, v})
	}
	return members, nil
}

// decodeArray splits a JSON array into its elements.
func decodeArray(raw json.RawMessage) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, fmt.Errorf("must be an array, not %s", kind(raw))
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("malformed array")
	}
	return list, nil
}

// kind names the JSON type of raw for errors, without quoting it.
func kind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

func decodeString(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", fmt.Errorf("must be a string, not %s", kind(raw))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errors.New("malformed string")
	}
	return s, nil
}

func decodeStrings(raw json.RawMessage) ([]string, error) {
	list, err := decodeArray(raw)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(list))
	for i, v := range list {
		if out[i], err = decodeString(v); err != nil {
			return nil, at(fmt.Sprintf("[%d]", i), err)
		}
	}
	return out, nil
}

// decodeCount reads a non-negative JSON integer, from its text.
func decodeCount(raw json.RawMessage) (int64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || !allDigits(string(raw)) {
		if kind(raw) == "a number" {
			return 0, fmt.Errorf("%s is not a non-negative integer", raw)
		}
		return 0, fmt.Errorf("must be a non-negative integer, not %s", kind(raw))
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is out of range", raw)
	}
	return n, nil
}

// decodePrice reads US dollars from a JSON string or the exact text of a JSON
// number, with ParseUSD.
func decodePrice(raw json.RawMessage) (Nano, error) {
	raw = bytes.TrimSpace(raw)
	switch kind(raw) {
	case "a string":
		s, err := decodeString(raw)
		if err != nil {
			return 0, err
		}
		return ParseUSD(s)
	case "a number":
		return ParseUSD(string(raw))
	default:
		return 0, fmt.Errorf("must be a price (a number or a string), not %s", kind(raw))
	}
}

// decodePriceMap reads an object of named prices ("sizes", "resolutions").
func decodePriceMap(raw json.RawMessage) (map[string]Nano, error) {
	members, err := decodeObject(raw)
	if err != nil {
		return nil, err
	}
	m := make(map[string]Nano, len(members))
	for _, f := range members {
		if m[f.key], err = decodePrice(f.value); err != nil {
			return nil, at(f.key, err)
		}
	}
	return m, nil
}

// MarshalJSON writes p as a route price object (docs/api.md#prices), keys in this
// order: unit, input, output, cache_read, cache_write, cache_write_1h,
// long_context {min_input_tokens, input, output}, sizes, resolutions,
// unit_price (sizes and resolutions sorted by name). Amounts are US dollars
// written exactly from the integers (Nano.String). unit is always written, and
// so are the fields the unit requires, zero or not: input and output for
// per_million_tokens (a free output reads "output": 0), unit_price for
// per_request. Every other zero or empty field is left out, so what
// MarshalJSON writes UnmarshalJSON reads back to the same Price.
func (p Price) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 128)
	b = append(b, `{"unit":`...)
	b = appendJSONString(b, string(p.Unit))
	tokens := p.Unit == PerMillionTokens
	field := func(name string, v Nano, always bool) {
		if v == 0 && !always {
			return
		}
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b = v.AppendUSD(b)
	}
	field("input", p.Input, tokens)
	field("output", p.Output, tokens)
	field("cache_read", p.CacheRead, false)
	field("cache_write", p.CacheWrite, false)
	field("cache_write_1h", p.CacheWrite1h, false)
	if lc := p.LongContext; lc != nil {
		b = append(b, `,"long_context":{"min_input_tokens":`...)
		b = strconv.AppendInt(b, lc.MinInputTokens, 10)
		b = append(b, `,"input":`...)
		b = lc.Input.AppendUSD(b)
		b = append(b, `,"output":`...)
		b = lc.Output.AppendUSD(b)
		b = append(b, '}')
	}
	for _, t := range [...]struct {
		name string
		m    map[string]Nano
	}{{"sizes", p.Sizes}, {"resolutions", p.Resolutions}} {
		if len(t.m) == 0 {
			continue
		}
		b = append(b, ',', '"')
		b = append(b, t.name...)
		b = append(b, '"', ':', '{')
		for i, k := range sortedKeys(t.m) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = t.m[k].AppendUSD(b)
		}
		b = append(b, '}')
	}
	field("unit_price", p.UnitPrice, p.Unit == PerRequest)
	return append(b, '}'), nil
}

// UnmarshalJSON reads a route price object with ParseModels' rules (exact
// prices from strings or numbers, unknown keys rejected, Validate). JSON null
// leaves p unchanged.
func (p *Price) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	if !json.Valid(data) {
		return syntaxError(data)
	}
	v, err := parsePrice(data)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

func appendJSONString(b []byte, s string) []byte {
	q, err := json.Marshal(s)
	if err != nil { // cannot happen for a string
		return append(b, `""`...)
	}
	return append(b, q...)
}
