package xlate

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// codec is what one wire format can do. A direction a format is never
// needed in is nil: responses is a caller's format only (an upstream that
// speaks it is an openai line, which also serves chat), Gemini an
// upstream's only.
type codec struct {
	parseRequest func(body []byte) (*Request, error)
	buildRequest func(r *Request) ([]byte, error)
	parseAnswer  func(body []byte) (*Answer, error)
	writeAnswer  func(a *Answer, r *Request) ([]byte, error)
	newDecoder   func() Decoder
	newEncoder   func(r *Request) Encoder
}

var codecs = map[Shape]*codec{}

// register is called by each format's file from init.
func register(s Shape, c *codec) { codecs[s] = c }

// Unsupported is a feature of the request its target cannot express: the
// gateway refuses the call with a 400 naming it, before anything is held.
type Unsupported struct {
	Feature string // e.g. "the web_search tool", "previous_response_id"
	Target  Shape
}

func (e *Unsupported) Error() string {
	if e.Target == "" {
		return e.Feature + " cannot be translated"
	}
	return fmt.Sprintf("%s cannot be translated to %s", e.Feature, e.Target)
}

// Invalid is a request field translation cannot read: a 400 naming it.
type Invalid struct {
	Field string
	Msg   string
}

func (e *Invalid) Error() string { return e.Field + ": " + e.Msg }

// ErrMalformed wraps what is wrong with an upstream's answer or stream.
type ErrMalformed struct{ Msg string }

func (e *ErrMalformed) Error() string { return "malformed upstream answer: " + e.Msg }

func malformed(format string, args ...any) error {
	return &ErrMalformed{Msg: fmt.Sprintf(format, args...)}
}

// ParseRequest reads a caller's request body of shape from.
func ParseRequest(from Shape, body []byte) (*Request, error) {
	c := codecs[from]
	if c == nil || c.parseRequest == nil {
		return nil, fmt.Errorf("xlate: %s requests cannot be read", from)
	}
	return c.parseRequest(body)
}

// BuildRequest writes r as a request of shape to: its body. An
// *Unsupported error names what to cannot express.
func BuildRequest(to Shape, r *Request) ([]byte, error) {
	c := codecs[to]
	if c == nil || c.buildRequest == nil {
		return nil, fmt.Errorf("xlate: %s requests cannot be written", to)
	}
	return c.buildRequest(r)
}

// TranslateAnswer turns an upstream's JSON answer of shape from into the
// caller's shape to, for the caller's request r.
func TranslateAnswer(from, to Shape, body []byte, r *Request) ([]byte, error) {
	cf, ct := codecs[from], codecs[to]
	if cf == nil || cf.parseAnswer == nil || ct == nil || ct.writeAnswer == nil {
		return nil, fmt.Errorf("xlate: no translation of %s answers to %s", from, to)
	}
	a, err := cf.parseAnswer(body)
	if err != nil {
		return nil, err
	}
	return ct.writeAnswer(a, r)
}

// Translates reports whether calls of shape from can go to an upstream of
// shape to, answer and stream included.
func Translates(from, to Shape) bool {
	cf, ct := codecs[from], codecs[to]
	return cf != nil && ct != nil && cf.parseRequest != nil && cf.writeAnswer != nil && cf.newEncoder != nil &&
		ct.buildRequest != nil && ct.parseAnswer != nil && ct.newDecoder != nil
}

// CallerID is the id a translated answer carries in the caller's shape:
// prefix ("chatcmpl-", "msg_", "resp_") and the upstream's id without its
// own such prefix, or random hex when the upstream gave none.
func CallerID(prefix, upstream string) string {
	for _, p := range [...]string{"chatcmpl-", "msg_", "resp_"} {
		upstream = strings.TrimPrefix(upstream, p)
	}
	if upstream == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		upstream = hex.EncodeToString(b[:])
	}
	return prefix + upstream
}
