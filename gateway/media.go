package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// Limits of the media endpoints.
const (
	// maxEditBody caps an image-edit upload; it is held in memory only.
	maxEditBody = 32 << 20
	// maxSystemOneBody is the limit on typed questions (docs/api.md#limits).
	maxSystemOneBody = 1 << 20
	// maxFormField caps one non-file field of an edit form.
	maxFormField = 64 << 10
)

// noUsage: an image answer without a data array made nothing: charge nothing.
func noUsage(*call, []byte) pricing.Usage { return pricing.Usage{} }

// numberText returns the JSON number text of raw → 400 naming field.
func numberText(field string, raw json.RawMessage) (string, *apierr.Error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] == '"' || t[0] == '{' || t[0] == '[' || bytes.Equal(t, []byte("true")) || bytes.Equal(t, []byte("false")) || bytes.Equal(t, []byte("null")) {
		return "", apierr.BadRequest(field, "%s must be a number", apierr.FieldPath(field))
	}
	var n json.Number
	if err := json.Unmarshal(t, &n); err != nil {
		return "", apierr.BadRequest(field, "%s must be a number", apierr.FieldPath(field))
	}
	return string(n), nil
}

// addNumberParam adds the number raw (its JSON text, checked by
// numberText) to ps as param name, unless raw is absent or null.
func addNumberParam(ps []abi.Param, name string, raw json.RawMessage) ([]abi.Param, *apierr.Error) {
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return ps, nil
	}
	n, e := numberText(name, raw)
	if e != nil {
		return nil, e
	}
	return addParam(ps, name, n), nil
}

func addParam(ps []abi.Param, name, value string) []abi.Param {
	return append(ps, abi.Param{Name: name, Value: value})
}

// imagesRequest is the part of an image request the gateway reads (docs/api.md#what-the-gateway-reads-of-a-request).
type imagesRequest struct {
	Model          *string         `json:"model"`
	Prompt         *string         `json:"prompt"`
	Size           *string         `json:"size"`
	N              json.RawMessage `json:"n"`
	Quality        *string         `json:"quality"`
	ResponseFormat *string         `json:"response_format"`
	Stream         *bool           `json:"stream"`
}

func decodeImages(body []byte) (*summary, error) {
	var req imagesRequest
	if e := decodeObject(body, &req); e != nil {
		return nil, e
	}
	return imageSummary(req)
}

func imageSummary(req imagesRequest) (*summary, error) {
	model, e := requireModel(req.Model)
	if e != nil {
		return nil, e
	}
	if req.Prompt == nil || strings.TrimSpace(*req.Prompt) == "" {
		return nil, apierr.BadRequest("prompt", "prompt is required")
	}
	s := &summary{model: model}
	if req.Size != nil {
		s.params = addParam(s.params, "size", *req.Size)
	}
	if s.params, e = addNumberParam(s.params, "n", req.N); e != nil {
		return nil, e
	}
	if req.Quality != nil {
		s.params = addParam(s.params, "quality", *req.Quality)
	}
	if req.ResponseFormat != nil {
		s.params = addParam(s.params, "response_format", *req.ResponseFormat)
	}
	if req.Stream != nil {
		s.stream = *req.Stream
		s.params = addParam(s.params, "stream", strconv.FormatBool(*req.Stream))
	}
	return s, nil
}

// decodeImageEdit reads a multipart/form-data edit (docs/api.md#endpoints) from memory:
// the whole body is already in memory under a limit, and it is read with a
// multipart.Reader, never ParseMultipartForm, so no part is ever written to
// a temporary file. The body is forwarded unchanged.
func decodeImageEdit(body []byte, contentType string) (*summary, error) {
	mt, ps, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" || ps["boundary"] == "" {
		return nil, apierr.BadRequest("body", "image edits take multipart/form-data with a boundary (Content-Type: %s)", apierr.Quote(contentType))
	}
	mr := multipart.NewReader(bytes.NewReader(body), ps["boundary"])
	var req imagesRequest
	images := 0
	str := func(v string) *string { return &v }
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// multipart's errors quote the line they choke on.
			return nil, apierr.BadRequest("body", "malformed multipart body: %s", apierr.Bound(err.Error(), apierr.MaxMessage))
		}
		name := p.FormName()
		if !utf8.ValidString(name) {
			return nil, apierr.BadRequest("body", "a form field's name is not valid UTF-8: %s", apierr.Quote(name))
		}
		// Only the text fields are checked for UTF-8, never a file's bytes.
		if p.FileName() != "" || name == "image" || name == "image[]" {
			if name == "image" || name == "image[]" {
				n, err := io.Copy(io.Discard, p)
				if err != nil {
					return nil, apierr.BadRequest("image", "cannot read the image file: %s", apierr.Bound(err.Error(), apierr.MaxMessage))
				}
				if n > 0 {
					images++
				}
			} else if _, err := io.Copy(io.Discard, p); err != nil {
				return nil, apierr.BadRequest(name, "cannot read %s: %s", apierr.FieldPath(name), apierr.Bound(err.Error(), apierr.MaxMessage))
			}
			continue
		}
		v, err := io.ReadAll(io.LimitReader(p, maxFormField+1))
		if err != nil {
			return nil, apierr.BadRequest(name, "cannot read %s: %s", apierr.FieldPath(name), apierr.Bound(err.Error(), apierr.MaxMessage))
		}
		if len(v) > maxFormField {
			return nil, apierr.BadRequest(name, "%s is longer than %d bytes", apierr.FieldPath(name), maxFormField)
		}
		if e := apierr.CheckUTF8(v, name, "the form field "+apierr.FieldPath(name)); e != nil {
			return nil, e
		}
		switch name {
		case "model":
			req.Model = str(string(v))
		case "prompt":
			req.Prompt = str(string(v))
		case "size":
			req.Size = str(string(v))
		case "n":
			req.N = json.RawMessage(strings.TrimSpace(string(v)))
			if len(req.N) == 0 {
				return nil, apierr.BadRequest("n", "n must be a number")
			}
		case "quality":
			req.Quality = str(string(v))
		case "response_format":
			req.ResponseFormat = str(string(v))
		}
	}
	if images == 0 {
		return nil, apierr.BadRequest("image", "image is required: a non-empty file part named \"image\"")
	}
	return imageSummary(req)
}

// rewriteJSONFields sets each param in the top-level JSON object as a string
// (the image size the plugin pinned); every other byte stays as it was.
func rewriteJSONFields(body []byte, set []abi.Param) ([]byte, error) {
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

// imagesUsage counts the images the provider returned (data[]).
func imagesUsage(body []byte) (pricing.Usage, bool, error) {
	var r struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return pricing.Usage{}, false, err
	}
	if r.Data == nil {
		return pricing.Usage{}, false, nil
	}
	return pricing.Usage{Images: int64(len(r.Data))}, true, nil
}

// imagesMeter counts completed images in a streamed image answer.
type imagesMeter struct{ images int64 }

func newImagesMeter() pricing.Meter { return &imagesMeter{} }

func (m *imagesMeter) Observe(event string, data []byte) error {
	if strings.HasSuffix(event, ".completed") || bytes.Contains(data, []byte(`"type":"image_generation.completed"`)) || bytes.Contains(data, []byte(`"type":"image_edit.completed"`)) {
		m.images++
	}
	return nil
}

func (m *imagesMeter) Usage() (pricing.Usage, bool) {
	return pricing.Usage{Images: m.images}, true
}

// videoRequest is the part of a video request the gateway reads (docs/api.md#what-the-gateway-reads-of-a-request).
type videoRequest struct {
	Model      *string         `json:"model"`
	Prompt     *string         `json:"prompt"`
	Duration   json.RawMessage `json:"duration"`
	Resolution *string         `json:"resolution"`
}

func decodeVideo(body []byte) (*summary, error) {
	var req videoRequest
	if e := decodeObject(body, &req); e != nil {
		return nil, e
	}
	model, e := requireModel(req.Model)
	if e != nil {
		return nil, e
	}
	if req.Prompt == nil || strings.TrimSpace(*req.Prompt) == "" {
		return nil, apierr.BadRequest("prompt", "prompt is required")
	}
	s := &summary{model: model}
	if s.params, e = addNumberParam(s.params, "duration", req.Duration); e != nil {
		return nil, e
	}
	if req.Resolution != nil {
		s.params = addParam(s.params, "resolution", *req.Resolution)
	}
	return s, nil
}

// systemOneRequest is a typed-question request (docs/api.md#what-the-gateway-reads-of-a-request).
type systemOneRequest struct {
	Model     *string                     `json:"model"`
	State     *string                     `json:"state"`
	Questions *map[string]json.RawMessage `json:"questions"`
}

type systemOneQuestion struct {
	Type         *string         `json:"type"`
	Instructions *string         `json:"instructions"`
	Options      *[]string       `json:"options"`
	Min          json.RawMessage `json:"min"`
	Max          json.RawMessage `json:"max"`
}

// stateTokens is the conservative estimate of a text's tokens used against
// the state limit: one token per three bytes, rounded up (tokenizers average
// three to four bytes per token, so this over-counts rather than under).
func stateTokens(n int) int64 { return int64((n + 2) / 3) }

func decodeSystemOne(body []byte) (*summary, error) {
	var req systemOneRequest
	if e := decodeObject(body, &req); e != nil {
		return nil, e
	}
	model, e := requireModel(req.Model)
	if e != nil {
		return nil, e
	}
	if req.State == nil {
		return nil, apierr.BadRequest("state", "state is required (the text the questions are about)")
	}
	if req.Questions == nil {
		return nil, apierr.BadRequest("questions", "questions is required: an object of named questions")
	}
	if len(*req.Questions) == 0 {
		return nil, apierr.BadRequest("questions", "questions must have at least one entry")
	}
	s := &summary{model: model}
	s.params = addParam(s.params, "state_tokens", itoa(stateTokens(len(*req.State))))
	names := make([]string, 0, len(*req.Questions))
	for n := range *req.Questions {
		names = append(names, n)
	}
	sort.Strings(names)
	const sep = "\x1f"
	for _, name := range names {
		f := "questions." + name
		raw := bytes.TrimSpace((*req.Questions)[name])
		if len(raw) == 0 || raw[0] != '{' {
			return nil, apierr.BadRequest(f, "%s must be a question object", apierr.FieldPath(f))
		}
		var q systemOneQuestion
		if err := json.Unmarshal(raw, &q); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, apierr.BadRequest(f+"."+te.Field, "%s: expected %s", apierr.FieldPath(f+"."+te.Field), jsonKind(te.Type.Kind().String()))
			}
			return nil, apierr.BadRequest(f, "%s: %s", apierr.FieldPath(f), apierr.Bound(err.Error(), apierr.MaxMessage))
		}
		if q.Type == nil {
			return nil, apierr.BadRequest(f+".type", "%s is required (noul, choice or score)", apierr.FieldPath(f+".type"))
		}
		s.params = addParam(s.params, "question", name)
		s.params = addParam(s.params, "question.type", name+sep+*q.Type)
		if q.Instructions != nil {
			s.params = addParam(s.params, "question.instructions_tokens", name+sep+itoa(stateTokens(len(*q.Instructions))))
		}
		if q.Options != nil {
			s.params = addParam(s.params, "question.options", name+sep+itoa(int64(len(*q.Options))))
		}
		for _, b := range []struct {
			key string
			raw json.RawMessage
		}{{"min", q.Min}, {"max", q.Max}} {
			if len(b.raw) == 0 || bytes.Equal(bytes.TrimSpace(b.raw), []byte("null")) {
				continue
			}
			v, e := numberText(f+"."+b.key, b.raw)
			if e != nil {
				return nil, e
			}
			s.params = addParam(s.params, "question."+b.key, name+sep+v)
		}
	}
	return s, nil
}
