package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/modelrelay/modelrelay/internal/jsonscan"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// ForceIncludeUsage returns body with stream_options.include_usage set to
// true, keeping every other byte of the top-level object. It is the one
// change the gateway makes to a forwarded body (see RATIONALE.md).
func ForceIncludeUsage(body []byte) ([]byte, error) {
	// The byte scanner answers for nearly every body; the tokenizing
	// decoder (about ten times slower) takes the ones it is unsure of.
	var start, end int
	val, at, found, ok := jsonscan.Member(body, "stream_options")
	if ok {
		start, end = at, at+len(val)
	} else {
		var err error
		if start, end, found, err = topLevelValueSpan(body, "stream_options"); err != nil {
			return nil, err
		}
	}
	if !found {
		i := bytes.IndexByte(body, '{')
		if i < 0 {
			return nil, errors.New("body is not an object")
		}
		out := make([]byte, 0, len(body)+40)
		out = append(out, body[:i+1]...)
		out = append(out, `"stream_options":{"include_usage":true}`...)
		rest := bytes.TrimLeft(body[i+1:], " \t\r\n")
		if len(rest) > 0 && rest[0] != '}' {
			out = append(out, ',')
		}
		return append(out, body[i+1:]...), nil
	}
	opts := map[string]json.RawMessage{}
	val = bytes.TrimSpace(body[start:end])
	if !bytes.Equal(val, []byte("null")) {
		if err := json.Unmarshal(val, &opts); err != nil {
			return nil, err
		}
	}
	opts["include_usage"] = json.RawMessage("true")
	nv, err := json.Marshal(opts)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(body)+len(nv))
	out = append(out, body[:start]...)
	out = append(out, nv...)
	return append(out, body[end:]...), nil
}

// topLevelValueSpan finds the byte span of the value of key in the top-level
// JSON object of body.
func topLevelValueSpan(body []byte, key string) (start, end int, found bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return 0, 0, false, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return 0, 0, false, errors.New("body is not an object")
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return 0, 0, false, err
		}
		k, _ := kt.(string)
		afterKey := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, 0, false, err
		}
		if k == key {
			end = int(dec.InputOffset())
			// skip the colon and white space between key and value
			s := afterKey
			for s < end && (body[s] == ':' || body[s] == ' ' || body[s] == '\t' || body[s] == '\r' || body[s] == '\n') {
				s++
			}
			return s, end, true, nil
		}
	}
	return 0, 0, false, nil
}

// RewriteJSONFields sets each param in the top-level JSON object as a string
// (the image size the plugin pinned); every other byte stays as it was.
func RewriteJSONFields(body []byte, set []abi.Param) ([]byte, error) {
	for _, p := range set {
		v, _ := json.Marshal(p.Value)
		start, end, found, err := topLevelValueSpan(body, p.Name)
		if err != nil {
			return nil, err
		}
		if found {
			body = append(append(append([]byte{}, body[:start]...), v...), body[end:]...)
			continue
		}
		i := bytes.IndexByte(body, '{')
		if i < 0 {
			return nil, errors.New("body is not an object")
		}
		ins := append(append([]byte(strconv.Quote(p.Name)+":"), v...), ',')
		body = append(append(append([]byte{}, body[:i+1]...), ins...), body[i+1:]...)
	}
	return body, nil
}
