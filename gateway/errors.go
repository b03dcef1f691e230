package gateway

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
)

// Error is what a handler returns to fail a request. writeError is the one
// place that turns it into the error body (docs/api.md#errors).
type Error struct {
	Status     int
	Type       string
	Code       any // string, integer or nil
	Message    string
	RetryAfter int // seconds; sent as Retry-After when > 0 (every 429 and 503 sends at least 1)
	// retryWait is the wait to the millisecond when it is known (a rate
	// limiter's delay), sent as retry-after-ms; else RetryAfter × 1000.
	retryWait time.Duration
	// retry overrides the x-should-retry hint the status implies (retryHints).
	retry retryHint
	// refusal marks a call turned away by design (overload, shutdown): the
	// access log records it, but it is not logged as a failure.
	refusal bool
	// early marks a refusal before any work for the call (shutting down,
	// overloaded, the ledger behind): its access line is a warning that
	// the log aggregates, so a storm of them writes kilobytes.
	early bool
	// provider marks a provider's error passed on: its message is the
	// provider's text, which may echo the caller's, so it is not logged.
	provider bool
}

func (e *Error) Error() string { return e.Message }

// retryHint says whether the SDKs should retry an answer: x-should-retry.
type retryHint uint8

const (
	hintByStatus retryHint = iota // true on 429 and 503, false on 402 and 403, else none
	hintRetry                     // true: a retry can succeed
	hintNoRetry                   // false: a retry cannot fix it
)

// retryHints are the headers the OpenAI and Anthropic SDKs read before
// their own rules (docs/api.md#headers): every 429 and 503 carries a wait,
// Retry-After in whole seconds (at least 1) and retry-after-ms beside it;
// x-should-retry is "false" on answers a retry cannot fix (402, 403, a 503
// because no line serves the model at all) and "true" on overload, rate
// limits and an upstream's transient failure. should is "" when the
// status says it all.
func (e *Error) retryHints() (secs int, ms int64, should string) {
	busy := e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable
	switch {
	case e.retry == hintRetry:
		should = "true"
	case e.retry == hintNoRetry:
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
		if w := e.retryWait.Milliseconds(); e.retryWait > 0 && w < ms {
			ms = max(w, 1)
		}
	}
	return secs, ms, should
}

// logText is what a log line says of the error: a provider's status only,
// or the gateway's message, bounded.
func (e *Error) logText() string {
	if e.provider {
		return "the provider answered HTTP " + strconv.Itoa(e.Status)
	}
	return bounded(e.Message, maxMessageText)
}

func errf(status int, typ string, code any, format string, args ...any) *Error {
	return &Error{Status: status, Type: typ, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Constructors for the statuses of docs/api.md#errors.
func badRequest(field, format string, args ...any) *Error {
	e := errf(http.StatusBadRequest, "invalid_request_error", "invalid_field", format, args...)
	if field != "" {
		e.Code = "invalid_" + field
		if len(field) > 40 || fieldPath(field) != field {
			e.Code = "invalid_field"
		}
	}
	return e
}

func unauthorized(format string, args ...any) *Error {
	return errf(http.StatusUnauthorized, "authentication_error", "invalid_api_key", format, args...)
}

func forbidden(format string, args ...any) *Error {
	return errf(http.StatusForbidden, "permission_error", "model_not_allowed", format, args...)
}

func notFound(format string, args ...any) *Error {
	return errf(http.StatusNotFound, "not_found_error", "not_found", format, args...)
}

func unavailable(code, format string, args ...any) *Error {
	return errf(http.StatusServiceUnavailable, "service_unavailable_error", code, format, args...)
}

// unserved is the 503 of a model no line is configured to serve: a retry
// cannot fix it, so it carries x-should-retry: false.
func unserved(format string, args ...any) *Error {
	e := unavailable("no_line_available", format, args...)
	e.retry = hintNoRetry
	return e
}

// refusal is a 503 the gateway gives by design, asking the client to retry
// after retryAfter seconds (0: no Retry-After).
func refusal(code string, retryAfter int, format string, args ...any) *Error {
	e := unavailable(code, format, args...)
	e.RetryAfter, e.refusal = retryAfter, true
	return e
}

// earlyRefusal is a refusal before any work for the call (see Error.early).
func earlyRefusal(code string, retryAfter int, format string, args ...any) *Error {
	e := refusal(code, retryAfter, format, args...)
	e.early = true
	return e
}

func internal(code, format string, args ...any) *Error {
	return errf(http.StatusInternalServerError, "api_error", code, format, args...)
}

// errorBody is the wire shape of docs/api.md#errors.
type errorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	} `json:"error"`
}

// toError maps any error a handler returns to an *Error.
func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var ae *abi.Error
	if errors.As(err, &ae) {
		// A plugin's message may quote the caller's values, and a plugin
		// is not trusted to bound them: the gateway does.
		msg := bounded(ae.Message, maxMessageText)
		switch ae.Code {
		case abi.CodeInvalid:
			if ae.Field != "" && !strings.Contains(ae.Message, ae.Field) {
				return badRequest(ae.Field, "%s: %s", fieldPath(ae.Field), msg)
			}
			return badRequest(ae.Field, "%s", msg)
		case abi.CodeForbidden:
			return forbidden("%s", msg)
		case abi.CodeUnprocessable:
			return errf(http.StatusUnprocessableEntity, "invalid_request_error", "unprocessable_entity", "%s", msg)
		default:
			return internal("plugin_error", "%s", msg)
		}
	}
	var pe *plugins.Error
	if errors.As(err, &pe) {
		if pe.Op == "select" {
			return unavailable("plugin_failure", "line selection failed in plugin %s", pe.Plugin)
		}
		return internal("plugin_failure", "plugin %s failed", pe.Plugin)
	}
	var ie *store.InsufficientError
	if errors.As(err, &ie) {
		if ie.Limit == store.LimitKey {
			return keyLimitError(ie, nil, time.Time{})
		}
		if ie.Available <= 0 {
			return errf(http.StatusPaymentRequired, "insufficient_quota", "insufficient_credit",
				"the account's balance is empty (available %s USD); this call needs up to %s USD", ie.Available.String(), ie.Needed.String())
		}
		return errf(http.StatusPaymentRequired, "insufficient_quota", "insufficient_credit",
			"insufficient credit: this call needs up to %s USD, available %s USD", ie.Needed.String(), ie.Available.String())
	}
	if errors.Is(err, store.ErrUnavailable) {
		return refusal("store_unavailable", storeRetryAfter, "the ledger cannot be reached just now; nothing was charged, try again shortly")
	}
	return internal("internal_error", "internal error")
}

// storeRetryAfter is the Retry-After, in seconds, of a 503 given because
// the store is unavailable.
const storeRetryAfter = 2

// writeError writes err in the error shape (docs/api.md#errors). The message ends with the
// request id, quoted with the support address.
func (g *Gateway) writeError(w http.ResponseWriter, rid string, err error) *Error {
	e := toError(err)
	b := errorJSON(e, g.cfg.SupportEmail, rid)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Request-Id", rid)
	secs, ms, should := e.retryHints()
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

// errorJSON is e's body in the error shape (docs/api.md#errors), newline-terminated: the one
// place it is written (writeError, and the answers a connection gets before
// any handler, listen.go).
func errorJSON(e *Error, support, rid string) []byte {
	var body errorBody
	body.Error.Message = fmt.Sprintf("%s — if you contact %s, quote request id %s", e.Message, support, rid)
	body.Error.Type = e.Type
	body.Error.Code = e.Code
	b, _ := json.Marshal(&body)
	return append(b, '\n')
}
