package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/billing"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/console"
	"github.com/modelrelay/modelrelay/gateway/lines"
	"github.com/modelrelay/modelrelay/gateway/listen"
	"github.com/modelrelay/modelrelay/internal/shared"
	"github.com/modelrelay/modelrelay/plugins"
	"github.com/modelrelay/modelrelay/store"
)

// Store is what the gateway needs of the store package: store.Service,
// declared there once.
type Store = store.Service

// Options wires a Gateway. Config must already be resolved (config.Load does).
type Options struct {
	Config  config.Config
	Store   Store
	Plugins *plugins.Host
	// Logger receives access and event logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Transport overrides the upstream transport of every line (tests).
	Transport http.RoundTripper
	// Shared is the Redis the replicas share (opened from Config.Redis by
	// the caller, which closes it after the Gateway). Default nil: limits,
	// the key cache, cooldowns and read-after-answer are this process's own.
	Shared *shared.Client
}

// Gateway is the HTTP front of ModelRelay.
type Gateway struct {
	cfg    config.Config
	store  Store
	host   *plugins.Host
	log    *slog.Logger
	now    func() time.Time
	lines  *lines.Set
	keys   *keyCache
	limits *limiters
	router *httprouter.Router
	front  http.Handler  // router behind CORS (cors.go)
	hdrs   *headerFilter // cleans upstream response headers (headers.go)
	met    *metrics
	sh     *shared.Client // nil: single replica (replicas.go)

	bill     *billing.Ledger // holds, settles and releases (package billing)
	inflight sync.WaitGroup
	closing  atomic.Bool
	shed     *shedder
	conns    *listen.Bounds   // open client connections (package listen)
	relay    *relay           // the relayed calls' pipeline (relay.go)
	console  *console.Console // nil: off (console.go)
}

// New builds a Gateway.
func New(o Options) (*Gateway, error) {
	if o.Store == nil || o.Plugins == nil {
		return nil, errors.New("gateway: Store and Plugins are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := o.Config.Resolve(); err != nil {
		return nil, err
	}
	g := &Gateway{
		cfg:   o.Config,
		store: o.Store,
		host:  o.Plugins,
		log:   o.Logger,
		now:   o.Now,
		keys:  newKeyCache(),
		sh:    o.Shared,
	}
	rl := &relay{cfg: o.Config, store: o.Store, host: o.Plugins, log: o.Logger, now: o.Now,
		authenticate: g.authenticate, closing: &g.closing, inflight: &g.inflight}
	g.bill = billing.New(billing.Options{
		Config: o.Config, Store: o.Store, Prices: o.Plugins, Logger: o.Logger, Now: o.Now, Shared: o.Shared,
		NewID: newRequestID, ObservePlugin: rl.observePlugin,
	})
	g.lines = lines.New(lines.Options{Config: o.Config, Transport: o.Transport, Log: o.Logger, Shared: o.Shared, Now: o.Now})
	g.limits = newLimiters(o.Config, o.Shared)
	g.shed = newShedder(o.Config.Limits.OverloadDelay)
	g.met = newMetrics(g)
	g.hdrs = newHeaderFilter(o.Config.Headers)
	rl.bill, rl.lines, rl.limits, rl.shed, rl.met, rl.hdrs = g.bill, g.lines, g.limits, g.shed, g.met, g.hdrs
	g.relay = rl
	g.conns = listen.New(o.Config, o.Logger, newRequestID)
	g.met.reg.MustRegister(g.conns.Collectors()...)
	if g.sh != nil {
		g.met.reg.MustRegister(g.sh.Collectors()...)
		g.startSharing()
	}
	var err error
	if g.console, err = g.adminAPI().Console(); err != nil {
		return nil, err
	}
	g.router = g.routes()
	// CORS covers /v1/* only: the console is same-origin, and the other
	// public pages set their own headers.
	g.front = withCORS(o.Config.CORS, slices.Concat(corsExposed, g.hdrs.renamed()), g.router)
	return g, nil
}

// drainAfterStop is how long Drain waits, once its ctx has ended, for the
// ledger writes it stopped to record their outcome.
const drainAfterStop = 2 * time.Second

// Handler is the gateway's HTTP handler.
func (g *Gateway) Handler() http.Handler { return g.front }

// Drain waits for in-flight relayed calls to finish, or ctx to end.
//
// Should ctx end first, the ledger writes still tried again are stopped
// and given drainAfterStop to record what they leave uncharged.
func (g *Gateway) Drain(ctx context.Context) error {
	g.closing.Store(true)
	done := make(chan struct{})
	go func() { g.inflight.Wait(); g.bill.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		// Writes still tried again end now: each answered call among
		// them is counted and logged as uncharged (package billing),
		// which takes them a moment.
		g.bill.Stop()
		t := time.NewTimer(drainAfterStop)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	// The allotments: on a timeout this retires them; each is released
	// once the carves of the calls still running return.
	g.bill.Close(ctx)
	return err
}

func (g *Gateway) routes() *httprouter.Router {
	r := httprouter.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true

	for _, ep := range endpoints {
		r.POST(ep.path, g.handle(ep.Label(), g.relay.handler(ep)))
		for _, alias := range ep.aliases {
			r.POST(alias, g.handle(ep.Label(), g.relay.handler(ep)))
		}
	}
	r.GET("/v1/responses", g.handle("responses_websocket", g.handleResponsesGet))
	r.GET("/v1/models", g.handle("models", g.handleModels))
	r.GET("/v1/videos/:id", g.handle("video_status", g.relay.handleVideoStatus))
	r.GET("/v1/videos/:id/content", g.handle("video_content", g.relay.handleVideoContent))

	g.holderRoutes(r)
	g.adminRoutes(r)
	g.consoleRoutes(r)
	g.opsRoutes(r)
	g.publicRoutes(r)

	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rid := newRequestID()
		if listen.BodyUnread(req, false) {
			listen.CloseUnread(w, req)
		}
		msg := "no such endpoint: " + apierr.Quote(req.Method) + " " + apierr.Quote(req.URL.Path)
		if svc := notRelayed(req.URL.Path); svc != "" {
			msg = svc + " is not relayed by this service"
		}
		apierr.Write(w, g.cfg.SupportEmail, rid, apierr.NotFound("%s", msg))
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rid := newRequestID()
		if listen.BodyUnread(req, false) {
			listen.CloseUnread(w, req)
		}
		apierr.Write(w, g.cfg.SupportEmail, rid, apierr.Errf(http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed",
			"method %s is not allowed on %s (allowed: %s)", apierr.Quote(req.Method), apierr.Quote(req.URL.Path), w.Header().Get("Allow")))
	})
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, v any) {
		if v == http.ErrAbortHandler {
			panic(v)
		}
		rid := w.Header().Get("X-Request-Id")
		if rid == "" {
			rid = newRequestID()
		}
		g.log.Error("panic in handler", "request_id", rid, "method", apierr.Quote(req.Method), "path", apierr.Quote(req.URL.Path), "panic", apierr.Bound(fmt.Sprint(v), apierr.MaxMessage))
		apierr.Write(w, g.cfg.SupportEmail, rid, apierr.Internal("internal_error", "internal error"))
	}
	return r
}

// notRelayed names the service of a path that is not relayed (docs/api.md#scope).
func notRelayed(path string) string {
	services := []struct{ prefix, name string }{
		{"/v1/batches", "batch"},
		{"/v1/fine_tuning", "fine-tuning"},
		{"/v1/fine-tunes", "fine-tuning"},
		{"/v1/files", "files"},
		{"/v1/assistants", "assistants"},
		{"/v1/threads", "assistants"},
		{"/v1/vector_stores", "vector stores"},
		{"/v1/realtime", "realtime"},
		{"/v1/audio", "audio"},
		{"/v1/embeddings", "embeddings"},
		{"/v1/messages/batches", "batch"},
	}
	for _, s := range services {
		if path == s.prefix || strings.HasPrefix(path, s.prefix+"/") {
			return s.name
		}
	}
	return ""
}

// reqInfo collects what the access log reports about one request.
type reqInfo struct {
	rid      string
	start    time.Time
	keyID    string
	account  string
	model    string
	route    string
	line     string
	charge   string
	upstream time.Duration
	ttfb     time.Duration // streams: until the first event reached the client
	stream   bool
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, info *reqInfo) error

// handle wraps a handler: request id, error writing, access log.
func (g *Gateway) handle(name string, fn handlerFunc) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		info := &reqInfo{rid: newRequestID(), start: g.now()}
		w.Header().Set("X-Request-Id", info.rid)
		sw := &statusWriter{ResponseWriter: w}
		if r.ContentLength == 0 || r.Method == http.MethodGet || r.Method == http.MethodHead {
			// Nothing to read (a GET's body, chunked or not, is never
			// read): lift server.body_timeout at once, as bodyRead does
			// once a body is in (a long download must not be cut by it).
			_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		}
		err := fn(sw, r, ps, info)
		status := sw.status
		level, msg := slog.LevelInfo, "request"
		if err != nil {
			if sw.wrote {
				// Headers are gone: the stream was cut. Nothing more can be said.
				g.log.Warn("request failed after response started", "request_id", info.rid, "error", apierr.Bound(err.Error(), apierr.MaxMessage))
			} else {
				if listen.BodyUnread(r, sw.bodyRead) {
					// Answered without reading the body: close, do not drain.
					listen.CloseUnread(w, r)
				}
				e := apierr.Write(sw, g.cfg.SupportEmail, info.rid, err)
				status = e.Status
				if e.Early {
					// Refused before any work: a warning, which the
					// process log aggregates (one line per 10 s with a
					// count; the metrics count each).
					level, msg = slog.LevelWarn, "request refused: "+fmt.Sprint(e.Code)
				}
				// A refusal by design is not a failure: the access log and
				// the metrics record it, and an error line per refused call
				// would cost CPU just when there is none.
				if e.Status >= 500 && !e.Refused {
					g.log.Error("request failed", "request_id", info.rid, "endpoint", name, "error", e.LogText())
				}
			}
		}
		if status == 0 {
			status = http.StatusOK
		}
		cut := err != nil && sw.wrote && errors.Is(err, errStreamCut)
		if sw.wrote && !cut {
			// Hand the whole answer to the client before the bookkeeping
			// below: net/http would only flush it once the handler returns.
			_ = http.NewResponseController(w).Flush()
		}
		g.met.observeRequest(name, info, status, g.now().Sub(info.start))
		g.accessLog(level, msg, name, r.Method, status, cut, info)
		if cut {
			// Pass the cut on: abort the connection instead of ending the
			// response cleanly, so the client cannot mistake it for a whole answer.
			panic(http.ErrAbortHandler)
		}
	}
}

// accessLog writes the access-log line of a request: at INFO, "request",
// unless it was refused before any work (see Error.early).
func (g *Gateway) accessLog(level slog.Level, msg, name, method string, status int, cut bool, info *reqInfo) {
	// One access-log line without growing or boxing. Durations are
	// whole microseconds: slog's JSON handler formats a float through
	// encoding/json (reflection and an allocation per value), an
	// integer with strconv.
	var buf [16]slog.Attr
	attrs := append(buf[:0],
		slog.String("request_id", info.rid), slog.String("endpoint", name), slog.String("method", method),
		slog.Int("status", status), slog.Int64("latency_us", g.now().Sub(info.start).Microseconds()))
	if info.keyID != "" {
		attrs = append(attrs, slog.String("key_id", info.keyID), slog.String("account", info.account))
	}
	if info.model != "" {
		attrs = append(attrs, slog.String("model", info.model), slog.String("route", info.route))
	}
	if info.line != "" {
		attrs = append(attrs, slog.String("line", info.line), slog.Int64("upstream_us", info.upstream.Microseconds()))
	}
	if info.charge != "" {
		attrs = append(attrs, slog.String("charge_usd", info.charge))
	}
	if info.stream {
		attrs = append(attrs, slog.Bool("stream", true))
	}
	if cut {
		attrs = append(attrs, slog.Bool("cut", true))
	}
	g.log.LogAttrs(context.Background(), level, msg, attrs...)
}

// statusWriter records the status and whether anything was written.
type statusWriter struct {
	http.ResponseWriter
	status   int
	wrote    bool
	bodyRead bool // the handler read the request body to its end (bodyRead)
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.status = code
		s.wrote = true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if !s.wrote {
		s.status = http.StatusOK
		s.wrote = true
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

var ridPrefix = func() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

var ridSeq atomic.Uint64

// newRequestID returns "req_" + a per-process random prefix + a counter and
// random suffix: unique across restarts and cheap.
func newRequestID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	n := ridSeq.Add(1)
	var buf [4 + 8 + 12 + 12]byte
	out := append(buf[:0], "req_"...)
	out = append(out, ridPrefix...)
	out = appendHex(out, n, 10)
	out = append(out, hex.EncodeToString(b[:])...)
	return string(out)
}

func appendHex(b []byte, n uint64, width int) []byte {
	const digits = "0123456789abcdef"
	var tmp [16]byte
	for i := width - 1; i >= 0; i-- {
		tmp[i] = digits[n&0xf]
		n >>= 4
	}
	return append(b, tmp[:width]...)
}
