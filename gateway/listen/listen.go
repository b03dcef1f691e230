package listen

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
)

// What a slow or hostile client can hold of the gateway is bounded here:
// open connections in total and per client address (Listener), and the
// time each phase of a request may take (ConfigureServer, BodyRead and
// CloseUnread). RATIONALE.md, "Connection bounds and request deadlines".

// lingerTime is how long a connection answered without reading its body
// stays half-closed before it is closed: long enough for the client to read
// the answer before the reset that closing over unread bytes sends (the
// value net/http waits in the same situation).
const lingerTime = 500 * time.Millisecond

// refusalWriteTimeout bounds the write of a refusal. It never blocks in
// practice (the connection's send buffer is empty); the bound is for Accept.
const refusalWriteTimeout = 100 * time.Millisecond

// A refusal waits up to refusalWait for the client's first byte before it
// answers, and lingers half-closed like an answer given without reading the
// body, while fewer than maxGentleRefusals are doing so (see refuse).
const (
	refusalWait       = 50 * time.Millisecond
	maxGentleRefusals = 16
)

// Bounds counts the open client connections, in total and per address,
// and refuses those past a bound (Listener).
type Bounds struct {
	max, perAddr int // ≤ 0: unbounded
	support      string
	server       config.ServerConfig
	log          *slog.Logger
	newID        func() string // a request id for each answer written here

	mu     sync.Mutex
	open   int
	byAddr map[netip.Addr]int

	refusedTotal, refusedAddr atomic.Uint64
	gentle                    atomic.Int32 // refusals waiting or lingering
	lastWarn                  atomic.Int64 // unix nanoseconds of the last refusal warning
}

// Refusal reasons, the label values of relay_connections_refused_total.
const (
	reasonTotal   = "total"
	reasonPerAddr = "per_address"
)

// New makes the bounds of cfg's server section; the answers it writes
// (refusals, net/http's own errors) carry cfg.SupportEmail and a request id
// from newID.
func New(cfg config.Config, log *slog.Logger, newID func() string) *Bounds {
	return &Bounds{
		max: cfg.Server.MaxConnections, perAddr: cfg.Server.MaxConnectionsPerAddress,
		support: cfg.SupportEmail, server: cfg.Server, log: log, newID: newID, byAddr: map[netip.Addr]int{},
	}
}

// Collectors are the metrics of the bounds: relay_connections_open and
// relay_connections_refused_total by reason.
func (b *Bounds) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_connections_open", Help: "Open client connections (server.max_connections bounds them).",
		}, func() float64 {
			open, _ := b.Open()
			return float64(open)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "relay_connections_refused_total", Help: "Client connections answered 503 and closed at once because a bound was reached.",
			ConstLabels: prometheus.Labels{"reason": reasonTotal},
		}, func() float64 { return float64(b.refusedTotal.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "relay_connections_refused_total", Help: "Client connections answered 503 and closed at once because a bound was reached.",
			ConstLabels: prometheus.Labels{"reason": reasonPerAddr},
		}, func() float64 { return float64(b.refusedAddr.Load()) }),
	}
}

// Open is the number of connections counted open, and of client addresses
// with one or more of them counted (when a per-address bound is set).
func (b *Bounds) Open() (conns, addrs int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open, len(b.byAddr)
}

// Refusing is the number of gentle refusals under way: waiting for the
// client's first byte, or lingering half-closed after the answer (refuse).
func (b *Bounds) Refusing() int { return int(b.gentle.Load()) }

// admit counts a new connection from ip, or says which bound refuses it.
func (b *Bounds) admit(ip netip.Addr) (reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.max > 0 && b.open >= b.max {
		b.refusedTotal.Add(1)
		return reasonTotal
	}
	if ip.IsValid() && b.perAddr > 0 {
		if b.byAddr[ip] >= b.perAddr {
			b.refusedAddr.Add(1)
			return reasonPerAddr
		}
		b.byAddr[ip]++
	}
	b.open++
	return ""
}

// release uncounts a connection admit counted.
func (b *Bounds) release(ip netip.Addr) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open--
	if ip.IsValid() && b.perAddr > 0 {
		if n := b.byAddr[ip] - 1; n > 0 {
			b.byAddr[ip] = n
		} else {
			delete(b.byAddr, ip)
		}
	}
}

// refuse answers a connection past a bound with a 503 in the error
// shape of docs/api.md#errors and closes it. It never blocks Accept. While few refusals are under
// way it is gentle, on a goroutine of its own: it waits until the client has
// sent something (one byte read, up to refusalWait), since an HTTP client
// may take an answer that comes before its request for a broken connection
// (Go's does), and after the answer it half-closes and lingers, so a client
// still sending reads the answer rather than a reset. Past
// maxGentleRefusals (a flood) it answers and closes at once: descriptors
// first.
func (b *Bounds) refuse(c net.Conn, reason string) {
	var e *apierr.Error
	if reason == reasonPerAddr {
		e = apierr.Refusal("too_many_connections_from_address", 1,
			"too many open connections from your address (the bound is %d); close some, or retry after 1 second", b.perAddr)
	} else {
		e = apierr.Refusal("too_many_connections", 1,
			"the gateway has reached its bound of %d open connections; retry after 1 second", b.max)
	}
	answer := b.answer(e, b.newID())
	if b.gentle.Add(1) <= maxGentleRefusals {
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(refusalWait))
			var first [1]byte
			_, _ = c.Read(first[:])
			_ = c.SetWriteDeadline(time.Now().Add(refusalWriteTimeout))
			_, _ = c.Write(answer)
			if cw, ok := c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				time.AfterFunc(lingerTime, func() { _ = c.Close(); b.gentle.Add(-1) })
				return
			}
			_ = c.Close()
			b.gentle.Add(-1)
		}()
	} else {
		b.gentle.Add(-1)
		_ = c.SetWriteDeadline(time.Now().Add(refusalWriteTimeout))
		_, _ = c.Write(answer)
		_ = c.Close()
	}
	now := time.Now().UnixNano()
	if last := b.lastWarn.Load(); now-last > int64(10*time.Second) && b.lastWarn.CompareAndSwap(last, now) {
		b.log.Warn("refusing connections: a bound is reached", "reason", reason,
			"max_connections", b.max, "max_connections_per_address", b.perAddr,
			"refused_total", b.refusedTotal.Load(), "refused_per_address", b.refusedAddr.Load())
	}
}

// answer is a whole HTTP/1.1 response carrying e in the error shape (docs/api.md#errors),
// closing the connection.
func (b *Bounds) answer(e *apierr.Error, rid string) []byte {
	j := apierr.JSON(e, b.support, rid)
	out := make([]byte, 0, 256+len(j))
	out = fmt.Appendf(out, "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Length: %d\r\nContent-Type: application/json\r\n",
		e.Status, http.StatusText(e.Status), len(j))
	secs, ms, should := e.RetryHints()
	if secs > 0 {
		out = fmt.Appendf(out, "Retry-After: %d\r\nRetry-After-Ms: %d\r\n", secs, ms)
	}
	if should != "" {
		out = fmt.Appendf(out, "X-Should-Retry: %s\r\n", should)
	}
	out = fmt.Appendf(out, "X-Request-Id: %s\r\n\r\n", rid)
	return append(out, j...)
}

// Listener wraps ln, the gateway's client listener: it bounds the open
// connections in total (server.max_connections) and per client address
// (server.max_connections_per_address). A connection past a bound is
// answered with 503 and Retry-After: 1 and closed (refuse); Accept goes on
// to the next one, so nothing queues. Connections already open are never
// touched. The connections it returns also answer net/http's own errors
// (431, 400, 501, 505, 417) in the error shape of docs/api.md#errors (plainError), and close
// gently after an answer given without reading the request's body
// (CloseUnread). Serve it with a server ConfigureServer has set up.
func (b *Bounds) Listener(ln net.Listener) net.Listener {
	b.log.Info("connection bounds", "max_connections", b.max, "max_connections_per_address", b.perAddr,
		"header_timeout", b.server.HeaderTimeout.String(), "body_timeout", b.server.BodyTimeout.String(),
		"idle_timeout", b.server.IdleTimeout.String())
	return &boundedListener{Listener: ln, b: b}
}

type boundedListener struct {
	net.Listener
	b *Bounds
}

func (l *boundedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		if reason := l.b.admit(ip); reason != "" {
			l.b.refuse(c, reason)
			continue
		}
		return &conn{Conn: c, b: l.b, ip: ip}, nil
	}
}

func remoteIP(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// conn is an admitted client connection.
type conn struct {
	net.Conn
	b          *Bounds
	ip         netip.Addr
	closed     atomic.Bool
	halfClosed atomic.Bool // CloseWrite was called
	linger     atomic.Bool // set by CloseUnread
	timedOut   atomic.Bool // the last read failed at its deadline
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.timedOut.Store(true)
		}
	} else if n > 0 && c.timedOut.Load() {
		c.timedOut.Store(false)
	}
	return n, err
}

// Write passes p on, unless p is one of the plain-text errors net/http
// writes itself, which it replaces with the same status in the error
// shape (docs/api.md#errors).
func (c *conn) Write(p []byte) (int, error) {
	if len(p) > 12 && (p[9] == '4' || p[9] == '5') {
		var e *apierr.Error
		if status, detail, ok := plainError(p); ok {
			e = plainErrorOf(status, detail)
			if status == http.StatusBadRequest && c.timedOut.Load() {
				// A request line cut short by server.header_timeout.
				e = apierr.Errf(http.StatusRequestTimeout, "invalid_request_error", "header_timeout",
					"the request line and headers did not arrive within %s", c.b.server.HeaderTimeout)
			}
		} else if expectationFailed(p) {
			e = apierr.Errf(http.StatusExpectationFailed, "invalid_request_error", "expectation_failed",
				"the gateway meets no Expect header but \"Expect: 100-continue\"")
		}
		if e != nil {
			if _, err := c.Conn.Write(c.b.answer(e, c.b.newID())); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return c.Conn.Write(p)
}

// expectationFailed recognises net/http's answer to an Expect header other
// than 100-continue: a 417 with no body, written whole in one piece (no
// handler of the gateway answers 417).
func expectationFailed(p []byte) bool {
	const status = "HTTP/1.1 417 Expectation Failed\r\n"
	return len(p) > len(status) && string(p[:len(status)]) == status &&
		bytes.HasSuffix(p, []byte("\r\n\r\n")) && bytes.Contains(p, []byte("\r\nContent-Length: 0\r\n"))
}

// CloseWrite half-closes the connection (net/http calls it before closing
// after an error, so the client reads the answer).
func (c *conn) CloseWrite() error {
	c.halfClosed.Store(true)
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close closes the connection and uncounts it, once. A connection answered
// without reading its body (CloseUnread) is half-closed now and closed
// lingerTime later, without a goroutine: closed at once over the unread
// bytes, it would reset, and a client still sending its body could lose the
// answer.
func (c *conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return net.ErrClosed
	}
	if c.linger.Load() && !c.halfClosed.Load() {
		if err := c.CloseWrite(); err == nil {
			time.AfterFunc(lingerTime, func() { _ = c.closeNow() })
			return nil
		}
	}
	return c.closeNow()
}

func (c *conn) closeNow() error {
	err := c.Conn.Close()
	c.b.release(c.ip)
	return err
}
