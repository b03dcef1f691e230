package listen

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/modelrelay/modelrelay/gateway/apierr"
)

// plainHeaders follow the status line of every error net/http writes to the
// connection itself (net/http's server.go, conn.serve). A response written through the
// server never has them there: its headers are sorted (Connection before
// Content-Type) and include Date.
const plainHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// plainError recognises one of net/http's own plain-text error answers,
// written in one piece: "HTTP/1.1 <status> <text>" plainHeaders, then a body
// repeating "<status> <text>" (or, for 501, "Unsupported transfer
// encoding"). It returns the status and the detail after "<reason>: " in the
// text, if any.
func plainError(p []byte) (status int, detail string, ok bool) {
	const prefix = "HTTP/1.1 "
	if len(p) < len(prefix)+4 || string(p[:len(prefix)]) != prefix {
		return 0, "", false
	}
	end := bytes.IndexByte(p, '\r')
	if end < 0 || len(p)-end < len(plainHeaders) || string(p[end:end+len(plainHeaders)]) != plainHeaders {
		return 0, "", false
	}
	line, body := p[len(prefix):end], p[end+len(plainHeaders):]
	if len(line) < 5 || line[3] != ' ' || bytes.IndexByte(line, '\n') >= 0 {
		return 0, "", false
	}
	status, err := strconv.Atoi(string(line[:3]))
	if err != nil || status < 400 || status > 599 {
		return 0, "", false
	}
	if !bytes.Equal(body, line) && !(status == http.StatusNotImplemented && string(body) == "Unsupported transfer encoding") {
		return 0, "", false
	}
	text := string(line[4:])
	reason := http.StatusText(status)
	if reason == "" || len(text) < len(reason) || text[:len(reason)] != reason {
		return 0, "", false
	}
	if rest := text[len(reason):]; rest != "" {
		if len(rest) < 3 || rest[:2] != ": " {
			return 0, "", false
		}
		detail = rest[2:]
	}
	return status, detail, true
}

// plainErrorOf is the error, in the shape of docs/api.md#errors, for one of net/http's own answers.
func plainErrorOf(status int, detail string) *apierr.Error {
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		return apierr.Errf(status, "invalid_request_error", "request_headers_too_large",
			"the request line and headers are larger than the %d bytes the gateway reads", http.DefaultMaxHeaderBytes)
	case http.StatusNotImplemented:
		return apierr.Errf(status, "invalid_request_error", "unsupported_transfer_encoding",
			"the request's Transfer-Encoding is not supported; send the body with a Content-Length or chunked")
	case http.StatusHTTPVersionNotSupported:
		return apierr.Errf(status, "invalid_request_error", "http_version_not_supported", "the gateway speaks HTTP/1.x")
	case http.StatusBadRequest:
		if detail != "" {
			return apierr.Errf(status, "invalid_request_error", "malformed_request", "the request is not valid HTTP/1.1: %s", detail)
		}
		return apierr.Errf(status, "invalid_request_error", "malformed_request",
			"the request is not valid HTTP/1.1: its request line, a header, its Content-Length or its chunked body is malformed")
	}
	msg := http.StatusText(status)
	if detail != "" {
		msg += ": " + detail
	}
	return apierr.Errf(status, "invalid_request_error", "malformed_request", "%s", msg)
}
