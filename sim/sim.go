package sim

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// # Endpoints
//
// All under /v1 but Gemini's, under /v1beta; JSON unless stated. Unknown
// paths answer 404, a known path with the wrong method 405, both with an
// error body.
//
//	POST /v1/chat/completions     text models (docs/api.md#models); JSON or SSE
//	POST /v1/responses            modelb-6-astra, modelb-6.1-sol, modelc-4.7; JSON or SSE
//	POST /v1/responses/compact    the responses models; JSON
//	POST /v1/messages             modela-fable-5-1, modela-sonnet-5-5, modela-opus-5-5; JSON or SSE
//	POST /v1/messages/count_tokens the messages models; JSON {"input_tokens": N}
//	POST /v1beta/models/{m}:generateContent   modelf-flash, modelf-v4-pro; JSON (gemini_request.go)
//	POST /v1beta/models/{m}:streamGenerateContent?alt=sse  same models; SSE
//	POST /v1/images/generations   modelb-image-2.5-sunburst, modelb-image-2.5-flare
//	POST /v1/images/edits         same models, multipart/form-data
//	POST /v1/videos/generations   modelc-imagine-video-1.5
//	GET  /v1/videos/{id}          status document
//	GET  /v1/videos/{id}/content  video/mp4 once done
//	POST /v1/systemone            sysmodel-1.13.0, sysmodel-latest, sysmodel-preview (alias /v1/system_one)
//	GET  /v1/models               every model of Models()
//	GET  /v1/images/files/{x}.png the target of response_format=url image answers
//
// A model the endpoint does not serve (unknown, or of another family) is
// 404: OpenAI shape {"error":{"message":"The model `x` does not exist",
// "type":"invalid_request_error","param":null,"code":"model_not_found"}};
// /v1/messages and /v1/messages/count_tokens answer every error in the
// Anthropic shape {"type":"error","error":{"type":"not_found_error",
// "message":"…"}}; the Gemini endpoints answer every error (faults and
// 401 too) in Google's shape {"error":{"code":404,"message":"…",
// "status":"NOT_FOUND"}}. A body that is not valid JSON, or misses a
// required field, is 400 and the message names the field (typed questions:
// validation problems are 422 with a FastAPI-style
// {"detail":[{"loc","msg","type"}]}). /v1/messages needs the header
// anthropic-version (or the neutral spelling vendorx-version, docs/api.md#versioning) and
// max_tokens, else 400 invalid_request_error; count_tokens needs the header
// but not max_tokens. The text endpoints also refuse (400) a conversation
// that sends back what the sim could not have answered: tool results
// without their call, thinking it did not sign (conv.go).
//
// # Faults and timing
//
// Fault-eligible requests are every POST and the two GET video endpoints,
// after routing and the API key check (a missing or wrong key is 401
// before any fault; GET /v1/models is never faulted). Faults are on when
// ErrorRate > 0, Status != 0 or Hang is set; the rate is then ErrorRate, or
// 1 (every request) when ErrorRate is 0. Eligible request i, counted from 0
// since New or the last SetOptions, faults iff floor((i+1)*rate) >
// floor(i*rate): over any first N requests exactly floor(N*rate) fault (0.5
// faults requests 1, 3, 5, …). With a non-zero Seed (-seed) each eligible
// request faults independently with probability rate instead (the i-th draw
// of SplitMix64 from Seed), so runs of failures occur as in production; the
// same seed gives the same sequence. A faulted request hangs without headers
// until the client goes away when Hang is set; otherwise, after Latency, it
// gets Status (default 500) and an error body (Anthropic shape on
// /v1/messages, Google's on /v1beta): 429 has Retry-After: RetryAfter
// (default 1) and type "requests"/"rate_limit_error", code
// "rate_limit_exceeded" (status RESOURCE_EXHAUSTED); 503 and 529 have
// message "overloaded" (type "server_error" code "overloaded" /
// "overloaded_error"; UNAVAILABLE); other 5xx "server_error"/"api_error"
// (INTERNAL).
//
// Latency is waited before the headers of every fault-eligible answer. A
// stream then flushes its headers, waits FirstChunk, sends its opening
// events and the first content chunk, and waits ChunkGap before each later
// content chunk; its closing events follow without waits. CutAfter > 0
// aborts every stream (panic(http.ErrAbortHandler): the connection is
// closed without a terminating chunk) right after min(CutAfter, Chunks)
// content chunks have been flushed: no finish chunk, usage chunk, [DONE] or
// closing event is sent. Close releases hanging and waiting requests by
// aborting them.

// Defaults applied when the corresponding Options field is zero.
const (
	DefaultChunks     = 8           // content chunks per streamed reply
	DefaultStatus     = 500         // fault status when only a rate, or Hang, is set
	DefaultVideoStep  = time.Second // one step of the video schedule
	DefaultRetryAfter = 1           // Retry-After seconds on a 429 fault
)

// Options controls the simulated provider's timing and faults. The zero
// value is a fast, fault-free provider.
type Options struct {
	// Latency is the wait before the response headers are sent (every
	// request that can fault, see "Faults and timing" above). 0 = none.
	Latency time.Duration
	// FirstChunk is the wait, after the headers of a stream are flushed,
	// before its first event. 0 = none.
	FirstChunk time.Duration
	// ChunkGap is the wait between two content chunks of a stream. 0 = none.
	ChunkGap time.Duration
	// Chunks is the number of content chunks in a streamed reply; 0 = 8.
	Chunks int
	// Status is the fault status (e.g. 500, 503, 429, 529). 0 = 500 when
	// faults are on. A non-zero Status alone turns faults on for every request.
	Status int
	// ErrorRate is the fraction of fault-eligible requests that fault, 0..1.
	// With Seed 0 it is an even sequence: eligible request i (counted from 0
	// since the options were last set) faults iff floor((i+1)*rate) >
	// floor(i*rate). With a Seed each request faults with probability
	// ErrorRate, independently, so runs of failures occur as in production.
	// 0 with Status or Hang set means every request; 1 = every request.
	ErrorRate float64
	// Seed, when non-zero, makes ErrorRate random: eligible request i faults
	// iff the i-th draw of a SplitMix64 sequence seeded with Seed, as a
	// fraction of 2^64, is below ErrorRate. The same seed gives the same
	// sequence of faults. 0 = the even sequence.
	Seed uint64
	// Hang makes faulted requests hang, sending nothing, until the client
	// goes away (or Close is called). Hang alone faults every request.
	Hang bool
	// CutAfter > 0 cuts every stream after this many content chunks: the
	// chunks are flushed, then the connection is aborted (no [DONE], no
	// final event).
	CutAfter int
	// RetryAfter is the Retry-After value, in seconds, of 429 faults; 0 = 1.
	RetryAfter int
	// APIKey, when set, must be presented as "Authorization: Bearer <key>",
	// "x-api-key: <key>" or "x-goog-api-key: <key>" (the Gemini endpoints
	// also take ?key=<key>); anything else is answered 401.
	APIKey string
	// VideoSteps is one step of the video schedule: a job is pending, then
	// processing after 1 step, then final after 3 steps. 0 = 1s.
	VideoSteps time.Duration
}

// RegisterFlags binds the options to fs, using the current values of o as
// the flag defaults: -latency -first-chunk -chunk-gap -chunks -fault-status
// -error-rate -seed -hang -cut-after -retry-after -api-key -video-steps.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.Latency, "latency", o.Latency, "sim: wait before sending response headers")
	fs.DurationVar(&o.FirstChunk, "first-chunk", o.FirstChunk, "sim: wait after the headers of a stream before its first event")
	fs.DurationVar(&o.ChunkGap, "chunk-gap", o.ChunkGap, "sim: wait between content chunks of a stream")
	fs.IntVar(&o.Chunks, "chunks", o.Chunks, "sim: content chunks per streamed reply (0 = 8)")
	fs.IntVar(&o.Status, "fault-status", o.Status, "sim: status of faulted requests, e.g. 500, 503, 429 (alone: every request faults)")
	fs.Float64Var(&o.ErrorRate, "error-rate", o.ErrorRate, "sim: fraction of requests that fault, 0..1 (an even sequence; random with -seed)")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "sim: with -error-rate, fault each request at random with that probability, from this seed (0 = the even sequence)")
	fs.BoolVar(&o.Hang, "hang", o.Hang, "sim: faulted requests hang until the client goes away")
	fs.IntVar(&o.CutAfter, "cut-after", o.CutAfter, "sim: abort every stream after this many content chunks (0 = never)")
	fs.IntVar(&o.RetryAfter, "retry-after", o.RetryAfter, "sim: Retry-After seconds on 429 faults (0 = 1)")
	fs.StringVar(&o.APIKey, "api-key", o.APIKey, "sim: API key the sim requires (empty = none)")
	fs.DurationVar(&o.VideoSteps, "video-steps", o.VideoSteps, "sim: one step of the video job schedule (0 = 1s)")
}

// Validate reports the first option that is out of range, naming its flag.
func (o Options) Validate() error {
	switch {
	case o.Latency < 0:
		return errors.New("sim: -latency must not be negative")
	case o.FirstChunk < 0:
		return errors.New("sim: -first-chunk must not be negative")
	case o.ChunkGap < 0:
		return errors.New("sim: -chunk-gap must not be negative")
	case o.Chunks < 0:
		return errors.New("sim: -chunks must not be negative")
	case o.Status != 0 && (o.Status < 400 || o.Status > 599):
		return fmt.Errorf("sim: -fault-status %d is not a 4xx or 5xx status", o.Status)
	case math.IsNaN(o.ErrorRate) || o.ErrorRate < 0 || o.ErrorRate > 1:
		return fmt.Errorf("sim: -error-rate %v is not within 0..1", o.ErrorRate)
	case o.CutAfter < 0:
		return errors.New("sim: -cut-after must not be negative")
	case o.RetryAfter < 0:
		return errors.New("sim: -retry-after must not be negative")
	case o.VideoSteps < 0:
		return errors.New("sim: -video-steps must not be negative")
	}
	return nil
}

// config is one immutable set of options plus the fault sequence that
// belongs to it; SetOptions swaps the whole thing atomically.
type config struct {
	opts     Options
	chunks   int
	status   int
	rate     float64 // > 0 when faults are on
	step     time.Duration
	eligible atomic.Int64 // fault-eligible requests seen under this config
}

func newConfig(o Options) *config {
	c := &config{opts: o, chunks: o.Chunks, status: o.Status, step: o.VideoSteps}
	if c.chunks <= 0 {
		c.chunks = DefaultChunks
	}
	if c.step <= 0 {
		c.step = DefaultVideoStep
	}
	rate := o.ErrorRate
	if math.IsNaN(rate) || rate < 0 {
		rate = 0
	}
	if rate > 1 {
		rate = 1
	}
	if rate == 0 && (o.Status != 0 || o.Hang) {
		rate = 1
	}
	c.rate = rate
	if c.status < 400 || c.status > 599 {
		c.status = DefaultStatus
	}
	return c
}

// fault reports whether the next fault-eligible request faults.
func (c *config) fault() bool {
	if c.rate <= 0 {
		return false
	}
	i := c.eligible.Add(1) - 1
	if c.rate >= 1 {
		return true
	}
	if c.opts.Seed != 0 {
		return float64(splitmix64(c.opts.Seed, uint64(i))>>11)/(1<<53) < c.rate
	}
	return math.Floor(float64(i+1)*c.rate) > math.Floor(float64(i)*c.rate)
}

// splitmix64 is the i-th output of a SplitMix64 generator seeded with seed
// (Steele, Lea and Flood, 2014; the seeder of xoshiro). Each output depends
// only on (seed, i), so the draw needs no lock and no state beyond the
// atomic request counter the even sequence already keeps: math/rand/v2's
// generators advance a state and would need a mutex on the hot path.
func splitmix64(seed, i uint64) uint64 {
	z := seed + (i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Server is the simulated provider. It implements http.Handler; create it
// with New.
type Server struct {
	cfg      atomic.Pointer[config]
	requests atomic.Int64
	seq      atomic.Uint64
	salt     uint32
	cache    promptCache
	videos   videoStore
	done     chan struct{}
	once     sync.Once
	now      func() time.Time
}

// New returns a simulated provider with the given options.
func New(opts Options) *Server {
	var b [4]byte
	_, _ = rand.Read(b[:])
	s := &Server{salt: binary.LittleEndian.Uint32(b[:]), done: make(chan struct{}), now: time.Now}
	s.cfg.Store(newConfig(opts))
	return s
}

// SetOptions replaces the options; requests in flight keep the options they
// started with. It restarts the deterministic ErrorRate sequence at 0.
func (s *Server) SetOptions(o Options) { s.cfg.Store(newConfig(o)) }

// Options returns the options in force.
func (s *Server) Options() Options { return s.cfg.Load().opts }

// Requests returns the number of requests received so far, on every path.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Close releases every request that is hanging or waiting (their
// connections are aborted) and makes later waits return at once. Call it
// before shutting down the http.Server that serves s. It is idempotent.
func (s *Server) Close() { s.once.Do(func() { close(s.done) }) }

// route is one endpoint of the sim.
type route uint8

const (
	routeNone route = iota
	routeChat
	routeResponses
	routeMessages
	routeImages
	routeImageEdits
	routeVideoCreate
	routeVideoGet
	routeVideoContent
	routeSystemOne
	routeModels
	routeImageFile
	routeCountTokens
	routeCompact
	routeGemini
	routeGeminiStream
)

// match maps a path to its route, the method it needs and, for video
// routes, the job id.
func match(path string) (rt route, method, id string) {
	switch path {
	case "/v1/chat/completions":
		return routeChat, http.MethodPost, ""
	case "/v1/responses":
		return routeResponses, http.MethodPost, ""
	case "/v1/messages":
		return routeMessages, http.MethodPost, ""
	case countTokensPath:
		return routeCountTokens, http.MethodPost, ""
	case compactPath:
		return routeCompact, http.MethodPost, ""
	case "/v1/images/generations":
		return routeImages, http.MethodPost, ""
	case "/v1/images/edits":
		return routeImageEdits, http.MethodPost, ""
	case "/v1/videos/generations":
		return routeVideoCreate, http.MethodPost, ""
	case "/v1/systemone", "/v1/system_one":
		return routeSystemOne, http.MethodPost, ""
	case "/v1/models":
		return routeModels, http.MethodGet, ""
	}
	if rest, ok := strings.CutPrefix(path, "/v1/videos/"); ok && rest != "" {
		if id, ok := strings.CutSuffix(rest, "/content"); ok {
			if id != "" && !strings.Contains(id, "/") {
				return routeVideoContent, http.MethodGet, id
			}
			return routeNone, "", ""
		}
		if !strings.Contains(rest, "/") {
			return routeVideoGet, http.MethodGet, rest
		}
	}
	if rest, ok := strings.CutPrefix(path, imageFilePrefix); ok && rest != "" && !strings.Contains(rest, "/") {
		return routeImageFile, http.MethodGet, rest
	}
	if rt, model := matchGemini(path); rt != routeNone {
		return rt, http.MethodPost, model
	}
	return routeNone, "", ""
}

// ServeHTTP answers one request: route, authenticate, maybe fault, wait
// Latency, then the endpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	cfg := s.cfg.Load()
	rt, method, id := match(r.URL.Path)
	sh := errorShape(rt, r.URL.Path)
	if rt == routeNone {
		writeError(w, sh, http.StatusNotFound, "invalid_request_error", "unknown_url",
			"Unknown request URL: "+r.Method+" "+r.URL.Path)
		return
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeError(w, sh, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed",
			"Method "+r.Method+" is not allowed on "+r.URL.Path+"; use "+method)
		return
	}
	if cfg.opts.APIKey != "" && !authorized(r, cfg.opts.APIKey, sh == shapeGoogle) {
		unauthorized(w, sh)
		return
	}
	ctx := r.Context()
	if rt != routeModels && rt != routeImageFile {
		if cfg.fault() {
			if cfg.opts.Hang {
				select {
				case <-ctx.Done():
				case <-s.done:
					panic(http.ErrAbortHandler)
				}
				return
			}
			if !s.wait(ctx, cfg.opts.Latency) {
				return
			}
			writeFault(w, sh, cfg)
			return
		}
		if !s.wait(ctx, cfg.opts.Latency) {
			return
		}
	}
	switch rt {
	case routeChat:
		s.chat(w, r, cfg)
	case routeResponses:
		s.responses(w, r, cfg)
	case routeMessages:
		s.messages(w, r, cfg)
	case routeCountTokens:
		s.countTokens(w, r)
	case routeCompact:
		s.compact(w, r)
	case routeImages:
		s.images(w, r)
	case routeImageEdits:
		s.imageEdits(w, r)
	case routeImageFile:
		s.imageFile(w, id)
	case routeVideoCreate:
		s.videoCreate(w, r, cfg)
	case routeVideoGet:
		s.videoGet(w, id)
	case routeVideoContent:
		s.videoContent(w, id)
	case routeSystemOne:
		s.systemOne(w, r)
	case routeModels:
		s.models(w)
	case routeGemini, routeGeminiStream:
		s.gemini(w, r, cfg, id, rt == routeGeminiStream)
	}
}

// errorShape is the error body shape of a route: Anthropic's on the
// messages routes, Google's under /v1beta, else OpenAI's.
func errorShape(rt route, path string) shape {
	switch {
	case rt == routeMessages || rt == routeCountTokens:
		return shapeAnthropic
	case strings.HasPrefix(path, "/v1beta/"):
		return shapeGoogle
	}
	return shapeOpenAI
}

// unauthorized answers 401 in shape sh.
func unauthorized(w http.ResponseWriter, sh shape) {
	switch sh {
	case shapeGoogle:
		writeError(w, sh, http.StatusUnauthorized, "", "", "API key not valid. Please pass a valid API key.")
	case shapeAnthropic:
		writeError(w, sh, http.StatusUnauthorized, "authentication_error", "", "invalid x-api-key")
	default:
		writeError(w, sh, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
			"Incorrect API key provided")
	}
}

// authorized reports whether r carries key as a Bearer token, x-api-key or
// x-goog-api-key, or (query) as the ?key= parameter.
func authorized(r *http.Request, key string, query bool) bool {
	for _, h := range [...]string{"x-api-key", "x-goog-api-key"} {
		if got := r.Header.Get(h); got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(key)) == 1 {
			return true
		}
	}
	if query {
		if got := r.URL.Query().Get("key"); got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(key)) == 1 {
			return true
		}
	}
	auth := r.Header.Get("Authorization")
	if len(auth) > 7 && strings.EqualFold(auth[:7], "Bearer ") {
		return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(auth[7:])), []byte(key)) == 1
	}
	return false
}

// wait sleeps d, returning false early when the client goes away. When the
// server is closed it aborts the connection instead.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		panic(http.ErrAbortHandler)
	}
}

// id appends prefix and a unique hex id to b.
func (s *Server) id(b []byte, prefix string) []byte {
	b = append(b, prefix...)
	b = appendHex(b, uint64(s.salt), 8)
	return appendHex(b, s.seq.Add(1), 16)
}

// newID returns prefix and a unique hex id.
func (s *Server) newID(prefix string) string {
	var buf [48]byte
	return string(s.id(buf[:0], prefix))
}

var _ http.Handler = (*Server)(nil)
