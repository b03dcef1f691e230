package listen

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
)

type connKey struct{}

// ConfigureServer sets s's deadlines from the server section of the
// configuration: server.header_timeout for a request's headers,
// server.body_timeout for the whole request from its start (a handler lifts
// it once it has read the body, see BodyRead), server.idle_timeout between
// kept-alive requests. It sets no write deadline: streams last as long as
// they last. Serve s on a Bounds' Listener so that answers given without
// reading the body close their connection gently.
func ConfigureServer(s *http.Server, cfg config.ServerConfig) {
	s.ReadHeaderTimeout = cfg.HeaderTimeout
	s.ReadTimeout = cfg.BodyTimeout
	s.IdleTimeout = cfg.IdleTimeout
	s.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if bc, ok := c.(*conn); ok {
			return context.WithValue(ctx, connKey{}, bc)
		}
		return ctx
	}
}

// BodyMarker is a response writer that records whether its handler read
// the request's body to its end (the gateway's handler wrapper is one), so
// that BodyUnread can be answered after the handler.
type BodyMarker interface {
	MarkBodyRead()
}

// BodyRead records that the handler has read the request's body to its
// end (on w, when it is a BodyMarker), and lifts the body's deadline
// (server.body_timeout): once the request is in, nothing more is read from
// the client until the next request, and a deadline left pending would
// cancel the request's context when it passed, in the middle of a stream.
func BodyRead(w http.ResponseWriter) {
	if m, ok := w.(BodyMarker); ok {
		m.MarkBodyRead()
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// aLongTimeAgo is a read deadline that has passed.
var aLongTimeAgo = time.Unix(1, 0)

// CloseUnread is called before answering a request whose body has not been
// read (an unknown key, a refusal, a body too large or too slow): the answer
// closes the connection ("Connection: close", so net/http does not read the
// body before answering), and the read deadline is set in the past, so the
// up to 256 KiB net/http would read after the handler to reuse the
// connection are not waited for. The connection then lingers half-closed
// (conn.Close).
func CloseUnread(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(aLongTimeAgo)
	if c, ok := r.Context().Value(connKey{}).(*conn); ok {
		c.linger.Store(true)
	}
}

// BodyUnread reports whether r carries a body its handler has not read;
// read says whether the handler read it to its end (see BodyRead).
func BodyUnread(r *http.Request, read bool) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody && !read
}

// ReadBody reads the request body fully, up to limit bytes: a body over
// the limit is a 400, one cut by server.body_timeout a 408 saying how much
// of it arrived.
func ReadBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, apierr.BadRequest("body", "the request body is %d bytes; the limit is %d bytes", r.ContentLength, limit)
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		// ReadFrom wants MinRead bytes free before each read, the one that
		// finds the end included: without them a body of exactly
		// ContentLength bytes is copied into a buffer twice its size.
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	n, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		got := strconv.FormatInt(n, 10)
		if r.ContentLength > 0 {
			got += " of " + strconv.FormatInt(r.ContentLength, 10)
		}
		return nil, apierr.Errf(http.StatusRequestTimeout, "invalid_request_error", "body_timeout",
			"the request body did not arrive in time (%s bytes arrived); send it faster, or a smaller one", got)
	}
	if err != nil {
		return nil, apierr.BadRequest("body", "cannot read the request body: %v", err)
	}
	if n > limit {
		return nil, apierr.BadRequest("body", "the request body is larger than the limit of %d bytes", limit)
	}
	return buf.Bytes(), nil
}
