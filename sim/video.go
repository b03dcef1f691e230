package sim

import (
	"encoding/binary"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// # Video
//
// A video job (POST → {"request_id":"vid_…","model","status":"pending"})
// follows the VideoSteps schedule (default 1s, fixed at creation): pending
// (progress 0) for the first step, processing after 1 step (33, then 66 after
// 2), and after 3 steps final: done (progress 100, with
// video{url:"/v1/videos/{id}/content", duration}), or failed (with
// error{code:"generation_failed"}) when the prompt contains "[fail]", or
// expired when it contains "[expire]". /content is 404 until the job is
// done, then a small fixed MP4 (ftyp + mdat boxes). Unknown ids are 404. At
// most 16384 jobs are kept, the oldest forgotten first.

const (
	videoPath     = "/v1/videos/generations"
	maxVideoJobs  = 16384 // jobs kept; the oldest is forgotten first
	failMarker    = "[fail]"
	expireMarker  = "[expire]"
	videoDuration = 8 // default seconds
)

// Video job statuses, in schedule order.
const (
	VideoPending    = "pending"
	VideoProcessing = "processing"
	VideoDone       = "done"
	VideoFailed     = "failed"
	VideoExpired    = "expired"
)

// videoRequest is what the sim reads of a video generation request.
type videoRequest struct {
	Model      string  `json:"model"`
	Prompt     *string `json:"prompt"`
	Duration   *int64  `json:"duration"`
	Resolution string  `json:"resolution"`
}

// videoJob is one accepted job. The prompt is not kept, only the final
// status it selected.
type videoJob struct {
	id, model, resolution string
	duration              int64
	created               time.Time
	step                  time.Duration
	end                   string
}

// videoStore is the bounded set of jobs. The zero value is ready to use.
type videoStore struct {
	mu   sync.Mutex
	jobs map[string]*videoJob
	ring []string
	pos  int
}

func (vs *videoStore) add(j *videoJob) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.jobs == nil {
		vs.jobs = make(map[string]*videoJob)
		vs.ring = make([]string, maxVideoJobs)
	}
	if old := vs.ring[vs.pos]; old != "" {
		delete(vs.jobs, old)
	}
	vs.ring[vs.pos] = j.id
	vs.pos = (vs.pos + 1) % maxVideoJobs
	vs.jobs[j.id] = j
}

func (vs *videoStore) get(id string) *videoJob {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	return vs.jobs[id]
}

// status returns the job's status and progress (percent) at now: pending
// for the first step, processing after 1 step, final after 3.
func (j *videoJob) status(now time.Time) (string, int) {
	steps := now.Sub(j.created) / j.step
	switch {
	case steps < 1:
		return VideoPending, 0
	case steps < 2:
		return VideoProcessing, 33
	case steps < 3:
		return VideoProcessing, 66
	}
	return j.end, 100
}

// videoCreate answers POST /v1/videos/generations.
func (s *Server) videoCreate(w http.ResponseWriter, r *http.Request, cfg *config) {
	sc := getScratch()
	defer putScratch(sc)
	if err := readBody(r, sc); err != nil {
		bodyError(w, shapeOpenAI, err)
		return
	}
	var q videoRequest
	if err := decodeJSON(sc.body.Bytes(), &q); err != nil {
		badRequest(w, shapeOpenAI, err.Error())
		return
	}
	if q.Model == "" {
		badRequest(w, shapeOpenAI, "`model` is required")
		return
	}
	if !serves(q.Model, famVideo) {
		modelError(w, shapeOpenAI, q.Model, videoPath)
		return
	}
	if err := q.check(); err != nil {
		badRequest(w, shapeOpenAI, err.Error())
		return
	}
	j := &videoJob{
		id:         s.newID("vid_"),
		model:      q.Model,
		resolution: q.Resolution,
		duration:   videoDuration,
		created:    s.now(),
		step:       cfg.step,
		end:        VideoDone,
	}
	if j.resolution == "" {
		j.resolution = "480p"
	}
	if q.Duration != nil {
		j.duration = *q.Duration
	}
	switch {
	case strings.Contains(*q.Prompt, failMarker):
		j.end = VideoFailed
	case strings.Contains(*q.Prompt, expireMarker):
		j.end = VideoExpired
	}
	s.videos.add(j)
	writeValue(w, http.StatusOK, map[string]any{
		"request_id": j.id,
		"model":      j.model,
		"status":     VideoPending,
		"created_at": j.created.Unix(),
	})
}

func (q *videoRequest) check() error {
	if q.Prompt == nil || *q.Prompt == "" {
		return errors.New("`prompt` is required")
	}
	if q.Duration != nil && (*q.Duration < 1 || *q.Duration > 15) {
		return errors.New("`duration` must be between 1 and 15 seconds, got " + strconv.FormatInt(*q.Duration, 10))
	}
	switch q.Resolution {
	case "", "480p", "720p", "1080p":
	default:
		return errors.New("`resolution` must be 480p, 720p or 1080p, got " + strconv.Quote(q.Resolution))
	}
	return nil
}

func videoNotFound(w http.ResponseWriter, id string) {
	writeError(w, shapeOpenAI, http.StatusNotFound, "invalid_request_error", "not_found",
		"video job `"+id+"` not found")
}

// videoGet answers GET /v1/videos/{id} with the job's status document.
func (s *Server) videoGet(w http.ResponseWriter, id string) {
	j := s.videos.get(id)
	if j == nil {
		videoNotFound(w, id)
		return
	}
	status, progress := j.status(s.now())
	doc := map[string]any{
		"request_id": j.id,
		"model":      j.model,
		"status":     status,
		"progress":   progress,
		"created_at": j.created.Unix(),
		"duration":   j.duration,
		"resolution": j.resolution,
	}
	switch status {
	case VideoDone:
		doc["video"] = map[string]any{
			"url":      "/v1/videos/" + j.id + "/content",
			"duration": j.duration,
		}
	case VideoFailed:
		doc["error"] = map[string]any{
			"code":    "generation_failed",
			"message": "the simulated video generation failed",
		}
	case VideoExpired:
		doc["error"] = map[string]any{
			"code":    "expired",
			"message": "the simulated video job expired before it was fetched",
		}
	}
	writeValue(w, http.StatusOK, doc)
}

// videoContent answers GET /v1/videos/{id}/content: the MP4 once the job is
// done, 404 before (and for failed or expired jobs).
func (s *Server) videoContent(w http.ResponseWriter, id string) {
	j := s.videos.get(id)
	if j == nil {
		videoNotFound(w, id)
		return
	}
	if status, _ := j.status(s.now()); status != VideoDone {
		writeError(w, shapeOpenAI, http.StatusNotFound, "invalid_request_error", "video_not_ready",
			"video job `"+id+"` has no content (status: "+status+")")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "video/mp4")
	h.Set("Content-Length", strconv.Itoa(len(tinyMP4)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(tinyMP4)
}

// tinyMP4 is the content of every finished job: an ISO BMFF `ftyp` box
// (brand isom, compatible isom/iso2/avc1/mp41) followed by a 1 KiB `mdat`
// box of a fixed byte pattern.
var tinyMP4 = func() []byte {
	box := func(b []byte, typ string, payload []byte) []byte {
		b = binary.BigEndian.AppendUint32(b, uint32(8+len(payload)))
		b = append(b, typ...)
		return append(b, payload...)
	}
	ftyp := []byte("isom\x00\x00\x02\x00isomiso2avc1mp41")
	mdat := make([]byte, 1024)
	for i := range mdat {
		mdat[i] = byte(i*31 + 7)
	}
	return box(box(nil, "ftyp", ftyp), "mdat", mdat)
}()
