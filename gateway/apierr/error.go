// Package apierr is the gateway's error: the statuses and codes of
// docs/api.md#errors, their retry hints, the one writer of the error body,
// and the bounds on caller text an error message or a log line may quote.
// It imports nothing of the gateway, so each of its packages can fail a
// request in the same shape.
package apierr

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelrelay/modelrelay/plugins"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/wire"
)

// Error is what a handler returns to fail a request. Write is the one
// place that turns it into the error body (docs/api.md#errors).
type Error struct {
	Status     int
	Type       string
	Code       any // string, integer or nil
	Message    string
	RetryAfter int // seconds; sent as Retry-After when > 0 (every 429 and 503 sends at least 1)
	// RetryWait is the wait to the millisecond when it is known (a rate
	// limiter's delay), sent as retry-after-ms; else RetryAfter × 1000.
	RetryWait time.Duration
	// Hint overrides the x-should-retry hint the status implies (RetryHints).
	Hint Hint
	// Refused marks a call turned away by design (overload, shutdown): the
	// access log records it, but it is not logged as a failure.
	Refused bool
	// Early marks a refusal before any work for the call (shutting down,
	// overloaded, the ledger behind): its access line is a warning that
	// the log aggregates, so a storm of them writes kilobytes.
	Early bool
	// Provider marks a provider's error passed on: its message is the
	// provider's text, which may echo the caller's, so it is not logged.
	Provider bool
}

func (e *Error) Error() string { return e.Message }

// Hint says whether the SDKs should retry an answer: x-should-retry.
type Hint uint8

const (
	HintByStatus Hint = iota // true on 429 and 503, false on 402 and 403, else none
	HintRetry                // true: a retry can succeed
	HintNoRetry              // false: a retry cannot fix it
)

// RetryHints are the headers the OpenAI and Anthropic SDKs read before
// their own rules (docs/api.md#headers): every 429 and 503 carries a wait,
// Retry-After in whole seconds (at least 1) and retry-after-ms beside it;
// x-should-retry is "false" on answers a retry cannot fix (402, 403, a 503
// because no line serves the model at all) and "true" on overload, rate
// limits and an upstream's transient failure. should is "" when the
// status says it all.
func (e *Error) RetryHints() (secs int, ms int64, should string) {
	busy := e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable
	switch {
	case e.Hint == HintRetry:
		should = "true"
	case e.Hint == HintNoRetry:
		should = "false"
	case busy:
		should = "true"
	case e.Status == http.StatusPaymentRequired || e.Status == http.StatusForbidden:
		should = "false"
	}
	secs = e.RetryAfter
	if busy && secs <= 0 {
		secs = 1
	}
	if secs > 0 {
		ms = int64(secs) * 1000
		if w := e.RetryWait.Milliseconds(); e.RetryWait > 0 && w < ms {
			ms = max(w, 1)
		}
	}
	return secs, ms, should
}

// LogText is what a log line says of the error: a provider's status only,
// or the gateway's message, bounded.
func (e *Error) LogText() string {
	if e.Provider {
		return "the provider answered HTTP " + strconv.Itoa(e.Status)
	}
	return Bound(e.Message, MaxMessage)
}

func Errf(status int, typ string, code any, format string, args ...any) *Error {
	return &Error{Status: status, Type: typ, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Constructors for the statuses of docs/api.md#errors.
func BadRequest(field, format string, args ...any) *Error {
	e := Errf(http.StatusBadRequest, "invalid_request_error", "invalid_field", format, args...)
	if field != "" {
		e.Code = "invalid_" + field
		if len(field) > 40 || FieldPath(field) != field {
			e.Code = "invalid_field"
		}
	}
	return e
}

func Unauthorized(format string, args ...any) *Error {
	return Errf(http.StatusUnauthorized, "authentication_error", "invalid_api_key", format, args...)
}

func Forbidden(format string, args ...any) *Error {
	return Errf(http.StatusForbidden, "permission_error", "model_not_allowed", format, args...)
}

func NotFound(format string, args ...any) *Error {
	return Errf(http.StatusNotFound, "not_found_error", "not_found", format, args...)
}

func Unavailable(code, format string, args ...any) *Error {
	return Errf(http.StatusServiceUnavailable, "service_unavailable_error", code, format, args...)
}

// Unserved is the 503 of a model no line is configured to serve: a retry
// cannot fix it, so it carries x-should-retry: false.
func Unserved(format string, args ...any) *Error {
	e := Unavailable("no_line_available", format, args...)
	e.Hint = HintNoRetry
	return e
}

// Refusal is a 503 the gateway gives by design, asking the client to retry
// after retryAfter seconds (0: no Retry-After).
func Refusal(code string, retryAfter int, format string, args ...any) *Error {
	e := Unavailable(code, format, args...)
	e.RetryAfter, e.Refused = retryAfter, true
	return e
}

// EarlyRefusal is a refusal before any work for the call (see Error.Early).
func EarlyRefusal(code string, retryAfter int, format string, args ...any) *Error {
	e := Refusal(code, retryAfter, format, args...)
	e.Early = true
	return e
}

func Internal(code, format string, args ...any) *Error {
	return Errf(http.StatusInternalServerError, "api_error", code, format, args...)
}

// Body is the wire shape of docs/api.md#errors.
type Body struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	} `json:"error"`
}

// From maps any error a handler returns to an *Error.
func From(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var ae *abi.Error
	if errors.As(err, &ae) {
		// A plugin's message may quote the caller's values, and a plugin
		// is not trusted to bound them: the gateway does.
		msg := Bound(ae.Message, MaxMessage)
		switch ae.Code {
		case abi.CodeInvalid:
			if ae.Field != "" && !strings.Contains(ae.Message, ae.Field) {
				return BadRequest(ae.Field, "%s: %s", FieldPath(ae.Field), msg)
			}
			return BadRequest(ae.Field, "%s", msg)
		case abi.CodeForbidden:
			return Forbidden("%s", msg)
		case abi.CodeUnprocessable:
			return Errf(http.StatusUnprocessableEntity, "invalid_request_error", "unprocessable_entity", "%s", msg)
		default:
			return Internal("plugin_error", "%s", msg)
		}
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return BadRequest(we.Field, "%s", we.Message)
	}
	var pe *plugins.Error
	if errors.As(err, &pe) {
		if pe.Op == "select" {
			return Unavailable("plugin_failure", "line selection failed in plugin %s", pe.Plugin)
		}
		return Internal("plugin_failure", "plugin %s failed", pe.Plugin)
	}
	var ie *store.InsufficientError
	if errors.As(err, &ie) {
		if ie.Limit == store.LimitKey {
			return KeyLimit(ie, nil, time.Time{})
		}
		if ie.Available <= 0 {
			return Errf(http.StatusPaymentRequired, "insufficient_quota", "insufficient_credit",
				"the account's balance is empty (available %s USD); this call needs up to %s USD", ie.Available.String(), ie.Needed.String())
		}
		return Errf(http.StatusPaymentRequired, "insufficient_quota", "insufficient_credit",
			"insufficient credit: this call needs up to %s USD, available %s USD", ie.Needed.String(), ie.Available.String())
	}
	if errors.Is(err, store.ErrUnavailable) {
		return Refusal("store_unavailable", StoreRetryAfter, "the ledger cannot be reached just now; nothing was charged, try again shortly")
	}
	return Internal("internal_error", "internal error")
}

// StoreRetryAfter is the Retry-After, in seconds, of a 503 given because
// the store is unavailable.
const StoreRetryAfter = 2

// Write writes err in the error shape (docs/api.md#errors) with its retry
// hints and X-Request-Id, and returns it as an *Error. The message ends
// with the request id, quoted with the support address.
func Write(w http.ResponseWriter, support, rid string, err error) *Error {
	e := From(err)
	b := JSON(e, support, rid)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Request-Id", rid)
	secs, ms, should := e.RetryHints()
	if secs > 0 {
		h.Set("Retry-After", strconv.Itoa(secs))
		h.Set("Retry-After-Ms", strconv.FormatInt(ms, 10))
	}
	if should != "" {
		h.Set("X-Should-Retry", should)
	}
	h.Del("Content-Length")
	w.WriteHeader(e.Status)
	_, _ = w.Write(b)
	return e
}

// JSON is e's body in the error shape (docs/api.md#errors), newline-terminated: the one
// place it is written (Write, and the answers a connection gets before
// any handler, package listen).
func JSON(e *Error, support, rid string) []byte {
	var body Body
	body.Error.Message = fmt.Sprintf("%s — if you contact %s, quote request id %s", e.Message, support, rid)
	body.Error.Type = e.Type
	body.Error.Code = e.Code
	b, _ := json.Marshal(&body)
	return append(b, '\n')
}
