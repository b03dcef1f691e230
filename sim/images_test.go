package sim

import (
	"bytes"
	"encoding/base64"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
)

type imageResponse struct {
	Created int64 `json:"created"`
	Data    []struct {
		B64JSON string `json:"b64_json"`
		URL     string `json:"url"`
	} `json:"data"`
	Usage any `json:"usage"`
}

func checkImages(t *testing.T, ts interface{ Client() *http.Client }, b []byte, n int, url bool) {
	t.Helper()
	r := decode[imageResponse](t, b)
	if r.Created == 0 || len(r.Data) != n || r.Usage != nil {
		t.Fatalf("image response %s, want %d images and no usage", b, n)
	}
	for _, d := range r.Data {
		var raw []byte
		if url {
			if d.URL == "" || d.B64JSON != "" {
				t.Fatalf("want url only: %+v", d)
			}
			resp, err := ts.Client().Get(d.URL)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" {
				t.Fatalf("GET %s: %d %s", d.URL, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
		} else {
			var err error
			if raw, err = base64.StdEncoding.DecodeString(d.B64JSON); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := png.Decode(bytes.NewReader(raw)); err != nil {
			t.Fatalf("not a PNG: %v", err)
		}
	}
}

func TestImageGenerations(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	cases := []struct {
		name   string
		body   string
		status int
		n      int
		url    bool
	}{
		{"default one image", `{"model":"modelb-image-2.5-sunburst","prompt":"a cat"}`, 200, 1, false},
		{"n and size", `{"model":"modelb-image-2.5-flare","prompt":"a cat","n":3,"size":"2048x2048","quality":"high"}`, 200, 3, false},
		{"auto size, url format", `{"model":"modelb-image-2.5-flare","prompt":"a cat","size":"auto","response_format":"url","n":2}`, 200, 2, true},
		{"bad size", `{"model":"modelb-image-2.5-flare","prompt":"a cat","size":"1024X1024"}`, 400, 0, false},
		{"zero size", `{"model":"modelb-image-2.5-flare","prompt":"a cat","size":"0x1024"}`, 400, 0, false},
		{"n too large", `{"model":"modelb-image-2.5-flare","prompt":"a cat","n":129}`, 400, 0, false},
		{"missing prompt", `{"model":"modelb-image-2.5-flare"}`, 400, 0, false},
		{"bad response_format", `{"model":"modelb-image-2.5-flare","prompt":"x","response_format":"gif"}`, 400, 0, false},
		{"text model", `{"model":"modelc-4.7","prompt":"a cat"}`, 404, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, http.MethodPost, "/v1/images/generations", tc.body, nil)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			if status != 200 {
				if e := decode[errBody](t, b); e.Error.Message == "" {
					t.Errorf("no error message: %s", b)
				}
				return
			}
			checkImages(t, ts, b, tc.n, tc.url)
		})
	}
}

// editForm builds a multipart image edit body.
func editForm(t *testing.T, fields map[string]string, files map[string][]byte) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		if err := mw.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range files {
		fw, err := mw.CreateFormFile(k, k+".png")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = fw.Write(v)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String(), mw.FormDataContentType()
}

func TestImageEdits(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	img := bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 1<<16) // 256 KiB
	ok := map[string]string{"model": "modelb-image-2.5-sunburst", "prompt": "add a hat", "size": "1024x1536", "n": "2"}
	cases := []struct {
		name   string
		fields map[string]string
		files  map[string][]byte
		ctype  string
		status int
		n      int
	}{
		{"image and mask", ok, map[string][]byte{"image": img, "mask": {1, 2}}, "", 200, 2},
		{"image[] spelling", map[string]string{"model": "modelb-image-2.5-flare", "prompt": "x"}, map[string][]byte{"image[]": img}, "", 200, 1},
		{"missing image", ok, nil, "", 400, 0},
		{"empty image", ok, map[string][]byte{"image": {}}, "", 400, 0},
		{"missing prompt", map[string]string{"model": "modelb-image-2.5-flare"}, map[string][]byte{"image": img}, "", 400, 0},
		{"bad n", map[string]string{"model": "modelb-image-2.5-flare", "prompt": "x", "n": "two"}, map[string][]byte{"image": img}, "", 400, 0},
		{"wrong model", map[string]string{"model": "modele-k3", "prompt": "x"}, map[string][]byte{"image": img}, "", 404, 0},
		{"not multipart", ok, map[string][]byte{"image": img}, "application/json", 400, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, ctype := editForm(t, tc.fields, tc.files)
			if tc.ctype != "" {
				ctype = tc.ctype
			}
			status, _, b := call(t, ts, http.MethodPost, "/v1/images/edits", body, map[string]string{"Content-Type": ctype})
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			if status == 200 {
				checkImages(t, ts, b, tc.n, false)
			} else if e := decode[errBody](t, b); e.Error.Message == "" {
				t.Errorf("no error message: %s", b)
			}
		})
	}
}

func TestImageEditTooLarge(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	body, ctype := editForm(t, map[string]string{"model": "modelb-image-2.5-flare", "prompt": "x"},
		map[string][]byte{"image": make([]byte, maxEditBody)})
	status, _, b := call(t, ts, http.MethodPost, "/v1/images/edits", body, map[string]string{"Content-Type": ctype})
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d: %s", status, b)
	}
	if !strings.Contains(string(b), "64 MiB") {
		t.Errorf("body %s", b)
	}
}
