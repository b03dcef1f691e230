package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelrelay/modelrelay/internal/clip"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

// maxFormField caps one non-file field of an image-edit form.
const maxFormField = 64 << 10

// numberText returns the JSON number text of raw → 400 naming field.
func numberText(field string, raw json.RawMessage) (string, *Error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] == '"' || t[0] == '{' || t[0] == '[' || bytes.Equal(t, []byte("true")) || bytes.Equal(t, []byte("false")) || bytes.Equal(t, []byte("null")) {
		return "", badRequest(field, "%s must be a number", clip.FieldPath(field))
	}
	var n json.Number
	if err := json.Unmarshal(t, &n); err != nil {
		return "", badRequest(field, "%s must be a number", clip.FieldPath(field))
	}
	return string(n), nil
}

// addNumberParam adds the number raw (its JSON text, checked by
// numberText) to ps as param name, unless raw is absent or null.
func addNumberParam(ps []abi.Param, name string, raw json.RawMessage) ([]abi.Param, *Error) {
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

// DecodeImages reads a POST /v1/images/generations request: model and a
// non-blank prompt are required; size, n, quality, response_format and
// stream are the params the plugin prices.
func DecodeImages(body []byte) (*Summary, error) {
	var req imagesRequest
	if e := decodeObject(body, &req); e != nil {
		return nil, e
	}
	return imageSummary(req)
}

func imageSummary(req imagesRequest) (*Summary, error) {
	model, e := requireModel(req.Model)
	if e != nil {
		return nil, e
	}
	if req.Prompt == nil || strings.TrimSpace(*req.Prompt) == "" {
		return nil, badRequest("prompt", "prompt is required")
	}
	s := &Summary{Model: model}
	if req.Size != nil {
		s.Params = addParam(s.Params, "size", *req.Size)
	}
	if s.Params, e = addNumberParam(s.Params, "n", req.N); e != nil {
		return nil, e
	}
	if req.Quality != nil {
		s.Params = addParam(s.Params, "quality", *req.Quality)
	}
	if req.ResponseFormat != nil {
		s.Params = addParam(s.Params, "response_format", *req.ResponseFormat)
	}
	if req.Stream != nil {
		s.Stream = *req.Stream
		s.Params = addParam(s.Params, "stream", strconv.FormatBool(*req.Stream))
	}
	return s, nil
}

// DecodeImageEdit reads a multipart/form-data edit (docs/api.md#endpoints) from memory:
// the whole body is already in memory under a limit, and it is read with a
// multipart.Reader, never ParseMultipartForm, so no part is ever written to
// a temporary file. The body is forwarded unchanged.
func DecodeImageEdit(body []byte, contentType string) (*Summary, error) {
	mt, ps, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" || ps["boundary"] == "" {
		return nil, badRequest("body", "image edits take multipart/form-data with a boundary (Content-Type: %s)", clip.Quote(contentType))
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
			return nil, badRequest("body", "malformed multipart body: %s", clip.Text(err.Error(), clip.MaxMessage))
		}
		name := p.FormName()
		if !utf8.ValidString(name) {
			return nil, badRequest("body", "a form field's name is not valid UTF-8: %s", clip.Quote(name))
		}
		// Only the text fields are checked for UTF-8, never a file's bytes.
		if p.FileName() != "" || name == "image" || name == "image[]" {
			if name == "image" || name == "image[]" {
				n, err := io.Copy(io.Discard, p)
				if err != nil {
					return nil, badRequest("image", "cannot read the image file: %s", clip.Text(err.Error(), clip.MaxMessage))
				}
				if n > 0 {
					images++
				}
			} else if _, err := io.Copy(io.Discard, p); err != nil {
				return nil, badRequest(name, "cannot read %s: %s", clip.FieldPath(name), clip.Text(err.Error(), clip.MaxMessage))
			}
			continue
		}
		v, err := io.ReadAll(io.LimitReader(p, maxFormField+1))
		if err != nil {
			return nil, badRequest(name, "cannot read %s: %s", clip.FieldPath(name), clip.Text(err.Error(), clip.MaxMessage))
		}
		if len(v) > maxFormField {
			return nil, badRequest(name, "%s is longer than %d bytes", clip.FieldPath(name), maxFormField)
		}
		if e := checkUTF8(v, name, "the form field "+clip.FieldPath(name)); e != nil {
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
				return nil, badRequest("n", "n must be a number")
			}
		case "quality":
			req.Quality = str(string(v))
		case "response_format":
			req.ResponseFormat = str(string(v))
		}
	}
	if images == 0 {
		return nil, badRequest("image", "image is required: a non-empty file part named \"image\"")
	}
	return imageSummary(req)
}

// ImagesUsage counts the images the provider returned (data[]).
func ImagesUsage(body []byte) (Usage, bool, error) {
	var r struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return Usage{}, false, err
	}
	if r.Data == nil {
		return Usage{}, false, nil
	}
	return Usage{Images: int64(len(r.Data))}, true, nil
}

// imagesMeter counts completed images in a streamed image answer.
type imagesMeter struct{ images int64 }

// NewImagesMeter returns the Meter of a streamed image answer: each
// *.completed event (by name, or by the type of its data) is one image.
func NewImagesMeter() Meter { return &imagesMeter{} }

func (m *imagesMeter) Observe(event string, data []byte) error {
	if strings.HasSuffix(event, ".completed") || bytes.Contains(data, []byte(`"type":"image_generation.completed"`)) || bytes.Contains(data, []byte(`"type":"image_edit.completed"`)) {
		m.images++
	}
	return nil
}

func (m *imagesMeter) Usage() (Usage, bool) {
	return Usage{Images: m.images}, true
}

// videoRequest is the part of a video request the gateway reads (docs/api.md#what-the-gateway-reads-of-a-request).
type videoRequest struct {
	Model      *string         `json:"model"`
	Prompt     *string         `json:"prompt"`
	Duration   json.RawMessage `json:"duration"`
	Resolution *string         `json:"resolution"`
}

// DecodeVideo reads a POST /v1/videos/generations request: model and a
// non-blank prompt are required; duration (a number) and resolution are the
// params the plugin prices.
func DecodeVideo(body []byte) (*Summary, error) {
	var req videoRequest
	if e := decodeObject(body, &req); e != nil {
		return nil, e
	}
	model, e := requireModel(req.Model)
	if e != nil {
		return nil, e
	}
	if req.Prompt == nil || strings.TrimSpace(*req.Prompt) == "" {
		return nil, badRequest("prompt", "prompt is required")
	}
	s := &Summary{Model: model}
	if s.Params, e = addNumberParam(s.Params, "duration", req.Duration); e != nil {
		return nil, e
	}
	if req.Resolution != nil {
		s.Params = addParam(s.Params, "resolution", *req.Resolution)
	}
	return s, nil
}

// VideoJobID reads the job id of a provider's answer accepting a video
// job ({"request_id": ...}): "" when the answer is not such an object or
// names no job.
func VideoJobID(answer []byte) string {
	var acc struct {
		RequestID string `json:"request_id"`
	}
	if json.Unmarshal(answer, &acc) != nil {
		return ""
	}
	return acc.RequestID
}

// VideoUsage is what an accepted video job consumed, read from the params it
// was admitted with (DecodeVideo's, after the plugin's quote set them):
// duration seconds, 0 when not an integer, at the resolution.
func VideoUsage(params []abi.Param) Usage {
	u := Usage{Resolution: paramValue(params, "resolution")}
	if d, err := strconv.ParseInt(paramValue(params, "duration"), 10, 64); err == nil {
		u.Seconds = d
	}
	return u
}

// paramValue is the value of the last param named name; "" when none.
func paramValue(ps []abi.Param, name string) string {
	v := ""
	for _, p := range ps {
		if p.Name == name {
			v = p.Value
		}
	}
	return v
}
