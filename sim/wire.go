package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"
)

// maxBody is the largest JSON request body the sim reads.
const maxBody = 32 << 20

// maxPooled is the largest buffer returned to the pool; bigger ones are left
// to the garbage collector so one huge request does not pin memory.
const maxPooled = 1 << 20

// scratch holds the per-request buffers of the JSON endpoints.
type scratch struct {
	body bytes.Buffer
	out  []byte
	pre  []byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

func putScratch(sc *scratch) {
	if sc.body.Cap() > maxPooled || cap(sc.out) > maxPooled || cap(sc.pre) > maxPooled {
		return
	}
	sc.body.Reset()
	sc.out = sc.out[:0]
	sc.pre = sc.pre[:0]
	scratchPool.Put(sc)
}

var errTooLarge = errors.New("request body is larger than 32 MiB")

// readBody reads r's body into sc.body, at most maxBody bytes.
func readBody(r *http.Request, sc *scratch) error {
	_, err := sc.body.ReadFrom(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return errors.New("reading request body: " + err.Error())
	}
	if sc.body.Len() > maxBody {
		return errTooLarge
	}
	return nil
}

// decodeJSON unmarshals a request body, turning decoder errors into
// messages that name the field at fault.
func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errors.New("request body is empty; expected a JSON object")
	}
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			return errors.New("request body must be a JSON object, not " + te.Value)
		}
		return errors.New("invalid type for `" + field + "`: got " + te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return errors.New("invalid JSON body at byte " + strconv.FormatInt(se.Offset, 10) + ": " + se.Error())
	}
	return errors.New("invalid JSON body: " + err.Error())
}

const hexDigits = "0123456789abcdef"

// appendHex appends v as exactly n lowercase hex digits (the low 4n bits).
func appendHex(b []byte, v uint64, n int) []byte {
	for i := n - 1; i >= 0; i-- {
		b = append(b, hexDigits[(v>>(4*uint(i)))&0xf])
	}
	return b
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does; U+2028 and U+2029 are escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendKey appends `"key":` (key must not need escaping).
func appendKey(b []byte, key string) []byte {
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

func appendInt(b []byte, v int64) []byte { return strconv.AppendInt(b, v, 10) }

// writeJSON sends body as a complete JSON response.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeValue marshals v with encoding/json (used off the hot path).
func writeValue(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, shapeOpenAI, http.StatusInternalServerError, "server_error", "", "encoding response: "+err.Error())
		return
	}
	writeJSON(w, status, body)
}

// shape selects the error body format.
type shape uint8

const (
	shapeOpenAI    shape = iota // {"error":{"message","type","param","code"}}
	shapeAnthropic              // {"type":"error","error":{"type","message"}}
	shapeGoogle                 // {"error":{"code","message","status"}}
)

// writeError sends an error body in shape sh. code "" is written as null
// (OpenAI shape only; the Anthropic shape has no code; the Google shape has
// the HTTP status as its code and its canonical name as its status, and
// neither typ nor code).
func writeError(w http.ResponseWriter, sh shape, status int, typ, code, msg string) {
	b := make([]byte, 0, 128+len(msg))
	switch sh {
	case shapeGoogle:
		b = append(b, `{"error":{"code":`...)
		b = appendInt(b, int64(status))
		b = append(b, `,"message":`...)
		b = appendString(b, msg)
		b = append(b, `,"status":`...)
		b = appendString(b, googleStatus(status))
		b = append(b, `}}`...)
	case shapeAnthropic:
		b = append(b, `{"type":"error","error":{"type":`...)
		b = appendString(b, typ)
		b = append(b, `,"message":`...)
		b = appendString(b, msg)
		b = append(b, `}}`...)
	default:
		b = append(b, `{"error":{"message":`...)
		b = appendString(b, msg)
		b = append(b, `,"type":`...)
		b = appendString(b, typ)
		b = append(b, `,"param":null,"code":`...)
		if code == "" {
			b = append(b, "null"...)
		} else {
			b = appendString(b, code)
		}
		b = append(b, `}}`...)
	}
	writeJSON(w, status, b)
}

// badRequest sends a 400 invalid_request_error.
func badRequest(w http.ResponseWriter, sh shape, msg string) {
	writeError(w, sh, http.StatusBadRequest, "invalid_request_error", "", msg)
}

// bodyError answers a body that could not be read or decoded.
func bodyError(w http.ResponseWriter, sh shape, err error) {
	if errors.Is(err, errTooLarge) {
		typ := "invalid_request_error"
		if sh == shapeAnthropic {
			typ = "request_too_large"
		}
		writeError(w, sh, http.StatusRequestEntityTooLarge, typ, "", err.Error())
		return
	}
	badRequest(w, sh, err.Error())
}

// modelError answers a model that is unknown, or known but not served by
// the endpoint, with 404.
func modelError(w http.ResponseWriter, sh shape, model, endpoint string) {
	msg := "The model `" + model + "` does not exist"
	if _, known := catalogue[model]; known {
		msg = "The model `" + model + "` is not served by " + endpoint
	}
	if sh == shapeAnthropic {
		writeError(w, sh, http.StatusNotFound, "not_found_error", "", msg)
		return
	}
	writeError(w, sh, http.StatusNotFound, "invalid_request_error", "model_not_found", msg)
}

// readRequest reads r's body into sc and parses it. When the body cannot be
// read or parsed, or names a model the endpoint does not serve (errModel,
// answered 404 naming endpoint), it answers in sh and returns false.
func readRequest[T interface{ model() string }](w http.ResponseWriter, r *http.Request, sc *scratch, sh shape, endpoint string, parse func([]byte) (T, error)) (T, bool) {
	var zero T
	if err := readBody(r, sc); err != nil {
		bodyError(w, sh, err)
		return zero, false
	}
	req, err := parse(sc.body.Bytes())
	if errors.Is(err, errModel) {
		modelError(w, sh, req.model(), endpoint)
		return zero, false
	}
	if err != nil {
		badRequest(w, sh, err.Error())
		return zero, false
	}
	return req, true
}

// writeFault sends the configured fault status with an error body.
func writeFault(w http.ResponseWriter, sh shape, c *config) {
	status := c.status
	var typ, code, msg string
	switch {
	case status == http.StatusTooManyRequests:
		ra := c.opts.RetryAfter
		if ra <= 0 {
			ra = DefaultRetryAfter
		}
		w.Header().Set("Retry-After", strconv.Itoa(ra))
		typ, code, msg = "requests", "rate_limit_exceeded", "Rate limit reached (simulated fault)"
		if sh == shapeAnthropic {
			typ = "rate_limit_error"
		}
	case status == http.StatusServiceUnavailable || status == 529:
		typ, code, msg = "server_error", "overloaded", "overloaded"
		if sh == shapeAnthropic {
			typ = "overloaded_error"
		}
	case status >= 500:
		typ, code, msg = "server_error", "", "The server had an error while processing your request (simulated fault)"
		if sh == shapeAnthropic {
			typ = "api_error"
		}
	default:
		typ, code, msg = "invalid_request_error", "", "Simulated fault "+strconv.Itoa(status)
		if sh == shapeAnthropic {
			switch status {
			case http.StatusUnauthorized:
				typ = "authentication_error"
			case http.StatusForbidden:
				typ = "permission_error"
			case http.StatusNotFound:
				typ = "not_found_error"
			case http.StatusRequestEntityTooLarge:
				typ = "request_too_large"
			}
		}
	}
	writeError(w, sh, status, typ, code, msg)
}
