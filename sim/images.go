package sim

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
)

// # Images
//
// Image answers are {"created", "data":[n × {"b64_json": an 8×8 PNG}]}, or
// {"url"} items with response_format=url; n is 1..128 (default 1), size is
// "auto", empty or <W>x<H>. Edits read the multipart body as a stream (never
// ParseMultipartForm, never a file on disk): model, prompt and a non-empty
// image (or image[]) file are required; the body is capped at 64 MiB.

// Image limits.
const (
	imageFilePrefix = "/v1/images/files/"
	maxImageN       = 128
	maxEditBody     = 64 << 20 // whole multipart body of an edit
	maxFormValue    = 64 << 10 // one non-file field of an edit
	maxFormParts    = 256      // parts of an edit form
)

// tinyPNG is the 8×8 PNG every image answer carries, and tinyPNGBase64
// its base64 form.
var tinyPNG, tinyPNGBase64 = func() ([]byte, string) {
	img := image.NewNRGBA(image.Rect(0, 0, 8, 8))
	for y := 0; y < 8; y++ {
		for x := 0; x < 8; x++ {
			img.SetNRGBA(x, y, color.NRGBA{R: uint8(32 * x), G: uint8(32 * y), B: 160, A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic("sim: encoding the built-in PNG: " + err.Error())
	}
	return buf.Bytes(), base64.StdEncoding.EncodeToString(buf.Bytes())
}()

// imageRequest is what the sim reads of an image generation or edit.
type imageRequest struct {
	Model          string  `json:"model"`
	Prompt         *string `json:"prompt"`
	N              *int64  `json:"n"`
	Size           string  `json:"size"`
	ResponseFormat string  `json:"response_format"`
}

// check validates the fields both image endpoints share, except the model.
func (q *imageRequest) check() error {
	if q.Prompt == nil || *q.Prompt == "" {
		return errors.New("`prompt` is required")
	}
	if q.N != nil && (*q.N < 1 || *q.N > maxImageN) {
		return errors.New("`n` must be between 1 and 128, got " + strconv.FormatInt(*q.N, 10))
	}
	if err := checkSize(q.Size); err != nil {
		return err
	}
	switch q.ResponseFormat {
	case "", "b64_json", "url":
	default:
		return errors.New("`response_format` must be \"b64_json\" or \"url\", got " + strconv.Quote(q.ResponseFormat))
	}
	return nil
}

// checkSize accepts "", "auto" and <WIDTH>x<HEIGHT> with positive integers.
func checkSize(size string) error {
	if size == "" || size == "auto" {
		return nil
	}
	w, h, ok := strings.Cut(size, "x")
	if ok && positiveInt(w) && positiveInt(h) {
		return nil
	}
	return errors.New("`size` must be \"auto\" or <WIDTH>x<HEIGHT>, got " + strconv.Quote(size))
}

func positiveInt(s string) bool {
	if s == "" || len(s) > 6 {
		return false
	}
	nonZero := false
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
		nonZero = nonZero || s[i] != '0'
	}
	return nonZero
}

// images answers POST /v1/images/generations.
func (s *Server) images(w http.ResponseWriter, r *http.Request) {
	sc := getScratch()
	defer putScratch(sc)
	if err := readBody(r, sc); err != nil {
		bodyError(w, shapeOpenAI, err)
		return
	}
	var q imageRequest
	if err := decodeJSON(sc.body.Bytes(), &q); err != nil {
		badRequest(w, shapeOpenAI, err.Error())
		return
	}
	s.imageAnswer(w, r, sc, &q, "/v1/images/generations")
}

// imageEdits answers POST /v1/images/edits (multipart/form-data). Files are
// counted and discarded, never buffered whole or written to disk.
func (s *Server) imageEdits(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxEditBody)
	mr, err := r.MultipartReader()
	if err != nil {
		badRequest(w, shapeOpenAI, "the body must be multipart/form-data: "+err.Error())
		return
	}
	q, err := parseEditForm(mr)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeError(w, shapeOpenAI, http.StatusRequestEntityTooLarge, "invalid_request_error", "",
				"request body is larger than 64 MiB")
			return
		}
		badRequest(w, shapeOpenAI, err.Error())
		return
	}
	sc := getScratch()
	defer putScratch(sc)
	s.imageAnswer(w, r, sc, &q, "/v1/images/edits")
}

// parseEditForm reads an image edit form: the fields model, prompt, size, n
// and response_format, and at least one non-empty `image` (or `image[]`)
// file. Other parts (mask, quality, …) are read and ignored.
func parseEditForm(mr *multipart.Reader) (imageRequest, error) {
	var q imageRequest
	images := 0
	for parts := 0; ; parts++ {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return q, fmt.Errorf("reading multipart form: %w", err)
		}
		if parts >= maxFormParts {
			return q, errors.New("multipart form has more than 256 parts")
		}
		name := p.FormName()
		if name == "image" || name == "image[]" || name == "mask" || p.FileName() != "" {
			n, err := io.Copy(io.Discard, p)
			if err != nil {
				return q, fmt.Errorf("reading form file `%s`: %w", name, err)
			}
			if (name == "image" || name == "image[]") && n > 0 {
				images++
			}
			continue
		}
		v, err := io.ReadAll(io.LimitReader(p, maxFormValue+1))
		if err != nil {
			return q, fmt.Errorf("reading form field `%s`: %w", name, err)
		}
		if len(v) > maxFormValue {
			return q, errors.New("form field `" + name + "` is larger than 64 KiB")
		}
		switch name {
		case "model":
			q.Model = string(v)
		case "prompt":
			s := string(v)
			q.Prompt = &s
		case "size":
			q.Size = string(v)
		case "response_format":
			q.ResponseFormat = string(v)
		case "n":
			n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
			if err != nil {
				return q, errors.New("`n` must be an integer, got " + strconv.Quote(string(v)))
			}
			q.N = &n
		}
	}
	if q.Model == "" {
		return q, errors.New("`model` is required")
	}
	if images == 0 {
		return q, errors.New("`image` is required: a non-empty image file")
	}
	return q, nil
}

// imageAnswer validates q and sends the image response.
func (s *Server) imageAnswer(w http.ResponseWriter, r *http.Request, sc *scratch, q *imageRequest, endpoint string) {
	if q.Model == "" {
		badRequest(w, shapeOpenAI, "`model` is required")
		return
	}
	if !serves(q.Model, famImage) {
		modelError(w, shapeOpenAI, q.Model, endpoint)
		return
	}
	if err := q.check(); err != nil {
		badRequest(w, shapeOpenAI, err.Error())
		return
	}
	n := int64(1)
	if q.N != nil {
		n = *q.N
	}
	b := append(sc.out, `{"created":`...)
	b = appendInt(b, s.now().Unix())
	b = append(b, `,"data":[`...)
	for i := int64(0); i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		if q.ResponseFormat == "url" {
			b = append(b, `{"url":`...)
			b = appendString(b, "http://"+r.Host+imageFilePrefix+s.newID("img_")+".png")
			b = append(b, '}')
		} else {
			b = append(b, `{"b64_json":"`...)
			b = append(b, tinyPNGBase64...)
			b = append(b, `"}`...)
		}
	}
	b = append(b, "]}"...)
	sc.out = b
	writeJSON(w, http.StatusOK, b)
}

// imageFile answers GET /v1/images/files/{name}.png, the target of url
// answers: always the built-in PNG.
func (s *Server) imageFile(w http.ResponseWriter, name string) {
	if !strings.HasSuffix(name, ".png") {
		writeError(w, shapeOpenAI, http.StatusNotFound, "invalid_request_error", "not_found", "image file not found")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "image/png")
	h.Set("Content-Length", strconv.Itoa(len(tinyPNG)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(tinyPNG)
}
