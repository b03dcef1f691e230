package sim

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"strings"
	"testing"
	"time"
)

type videoDoc struct {
	RequestID string `json:"request_id"`
	Model     string `json:"model"`
	Status    string `json:"status"`
	Progress  *int   `json:"progress"`
	Duration  int64  `json:"duration"`
	Video     *struct {
		URL string `json:"url"`
	} `json:"video"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

func TestVideoLifecycle(t *testing.T) {
	t.Parallel()
	const step = 10 * time.Second
	cases := []struct {
		name   string
		prompt string
		final  string
	}{
		{"done", "a cat on a skateboard", VideoDone},
		{"failed", "a cat [fail]", VideoFailed},
		{"expired", "[expire] a cat", VideoExpired},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ts, clk := newClockServer(t, Options{VideoSteps: step})
			status, _, b := call(t, ts, http.MethodPost, "/v1/videos/generations",
				`{"model":"modelc-imagine-video-1.5","prompt":"`+tc.prompt+`","duration":5,"resolution":"720p"}`, nil)
			if status != http.StatusOK {
				t.Fatalf("create: %d %s", status, b)
			}
			job := decode[videoDoc](t, b)
			if !strings.HasPrefix(job.RequestID, "vid_") || job.Model != "modelc-imagine-video-1.5" || job.Status != VideoPending {
				t.Fatalf("accepted job %s", b)
			}
			schedule := []struct {
				at       time.Duration
				status   string
				progress int
			}{
				{0, VideoPending, 0},
				{step - time.Nanosecond, VideoPending, 0},
				{step, VideoProcessing, 33},
				{2 * step, VideoProcessing, 66},
				{3*step - time.Nanosecond, VideoProcessing, 66},
				{3 * step, tc.final, 100},
				{10 * step, tc.final, 100},
			}
			var at time.Duration
			for _, want := range schedule {
				clk.advance(want.at - at)
				at = want.at
				status, _, b := call(t, ts, http.MethodGet, "/v1/videos/"+job.RequestID, "", nil)
				if status != http.StatusOK {
					t.Fatalf("poll at %v: %d %s", at, status, b)
				}
				doc := decode[videoDoc](t, b)
				if doc.Status != want.status || doc.Progress == nil || *doc.Progress != want.progress ||
					doc.RequestID != job.RequestID || doc.Duration != 5 {
					t.Errorf("at %v: %s, want %s/%d", at, b, want.status, want.progress)
				}
				if (doc.Video != nil) != (doc.Status == VideoDone) {
					t.Errorf("at %v: video field %+v with status %s", at, doc.Video, doc.Status)
				}
				if (doc.Error != nil) != (doc.Status == VideoFailed || doc.Status == VideoExpired) {
					t.Errorf("at %v: error field %+v with status %s", at, doc.Error, doc.Status)
				}
				cstatus, hdr, content := call(t, ts, http.MethodGet, "/v1/videos/"+job.RequestID+"/content", "", nil)
				if doc.Status != VideoDone {
					if cstatus != http.StatusNotFound {
						t.Errorf("content at %v (%s): status %d", at, doc.Status, cstatus)
					}
					continue
				}
				if cstatus != http.StatusOK || hdr.Get("Content-Type") != "video/mp4" {
					t.Fatalf("content: %d %s", cstatus, hdr.Get("Content-Type"))
				}
				checkMP4(t, content)
				if doc.Video.URL != "/v1/videos/"+job.RequestID+"/content" {
					t.Errorf("video url %q", doc.Video.URL)
				}
			}
		})
	}
}

// checkMP4 walks the top-level ISO BMFF boxes: ftyp first, then mdat.
func checkMP4(t *testing.T, b []byte) {
	t.Helper()
	var types []string
	for len(b) > 0 {
		if len(b) < 8 {
			t.Fatalf("truncated box header")
		}
		size := binary.BigEndian.Uint32(b)
		if size < 8 || int(size) > len(b) {
			t.Fatalf("box size %d with %d bytes left", size, len(b))
		}
		types = append(types, string(b[4:8]))
		if string(b[4:8]) == "ftyp" && !bytes.HasPrefix(b[8:], []byte("isom")) {
			t.Errorf("ftyp major brand %q", b[8:12])
		}
		b = b[size:]
	}
	if strings.Join(types, ",") != "ftyp,mdat" {
		t.Errorf("boxes %v, want ftyp,mdat", types)
	}
}

func TestVideoErrors(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	cases := []struct {
		name         string
		method, path string
		body         string
		status       int
	}{
		{"unknown id", http.MethodGet, "/v1/videos/vid_nope", "", 404},
		{"unknown id content", http.MethodGet, "/v1/videos/vid_nope/content", "", 404},
		{"wrong model", http.MethodPost, "/v1/videos/generations", `{"model":"modelc-4.7","prompt":"x"}`, 404},
		{"missing prompt", http.MethodPost, "/v1/videos/generations", `{"model":"modelc-imagine-video-1.5"}`, 400},
		{"duration out of range", http.MethodPost, "/v1/videos/generations", `{"model":"modelc-imagine-video-1.5","prompt":"x","duration":16}`, 400},
		{"bad resolution", http.MethodPost, "/v1/videos/generations", `{"model":"modelc-imagine-video-1.5","prompt":"x","resolution":"4k"}`, 400},
		{"nested path", http.MethodGet, "/v1/videos/a/b", "", 404},
		{"post to a job", http.MethodPost, "/v1/videos/vid_x", `{}`, 405},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, tc.method, tc.path, tc.body, nil)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			if e := decode[errBody](t, b); e.Error.Message == "" {
				t.Errorf("no error message: %s", b)
			}
		})
	}
}

func TestVideoStoreBounded(t *testing.T) {
	t.Parallel()
	var vs videoStore
	for i := 0; i < maxVideoJobs+10; i++ {
		vs.add(&videoJob{id: "vid_" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)})
	}
	if len(vs.jobs) != maxVideoJobs {
		t.Fatalf("%d jobs kept, want %d", len(vs.jobs), maxVideoJobs)
	}
	if vs.get("vid_a") != nil {
		t.Errorf("the oldest job was kept")
	}
}
