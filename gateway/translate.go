package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/lines"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/wire"
	"github.com/modelrelay/modelrelay/wire/xlate"
)

// A text call (chat completions, responses, messages) may be served by a
// line that speaks another protocol: it is translated (package
// wire/xlate). translateCall makes, before anything is held, the body
// each such line gets; a line of the endpoint's own protocol gets the
// caller's body byte for byte, as before. The answer — JSON, stream or
// error — is translated back into the caller's shape; the charge is read
// from the upstream's answer in its own shape (upstreamReader), so it is
// exactly what an untranslated call to that line would cost.

// xcall is a call's translation: the caller's request in neutral form and
// the forms of the lines of other protocols.
type xcall struct {
	req   *xlate.Request
	forms map[string]*lines.Form
	// chatLine: an openai-chat line serves the call natively (a chat
	// call); send gives it the call's body as prepared.
	chatLine bool
}

// lineShape is the wire format a line of protocol answers text calls in.
func lineShape(protocol string) xlate.Shape {
	switch protocol {
	case config.ProtocolAnthropic:
		return xlate.Messages
	case config.ProtocolGemini:
		return xlate.Gemini
	default: // openai and openai-chat lines serve chat completions
		return xlate.Chat
	}
}

// translated reports whether a line of protocol gets c translated (an
// openai-chat line given a chat call's own body does not).
func (c *call) translated(protocol string) bool {
	if c.x == nil {
		return false
	}
	f := c.x.forms[protocol]
	return f != nil && f.Translated
}

// native reports whether c goes as the caller sent it to the lines of
// its endpoint's protocol: the model's catalogue lists the endpoint. A
// call on an endpoint only the configuration's serve entries add is
// translated for every line, its endpoint's protocol's included: their
// upstream serves the model as the catalogue says.
func (c *call) native() bool { return slices.Contains(c.model.Endpoints, c.ep.name) }

// translateCall prepares c's translation when a line of another protocol
// serves its model on its route. A request no serving line can take — a
// feature its protocol cannot express, on a model without a line of the
// endpoint's own — is a 400 naming the feature and the model.
func (rl *relay) translateCall(c *call) error {
	if c.ep.shape == "" {
		return nil
	}
	var own bool
	var others []string
	for _, p := range rl.lines.Protocols(c.model.ID, c.route, c.model.Endpoints) {
		switch {
		case !c.native():
			others = append(others, p)
		case p == c.ep.protocol:
			own = true
		case p == config.ProtocolOpenAIChat && c.ep.shape == xlate.Chat:
			own = true
			c.x = &xcall{chatLine: true}
		default:
			others = append(others, p)
		}
	}
	if len(others) == 0 {
		return nil
	}
	req, err := xlate.ParseRequest(c.ep.shape, c.body)
	if err != nil {
		var un *xlate.Unsupported
		if errors.As(err, &un) && own {
			return nil // the endpoint's own lines serve it; the others cannot
		}
		return translationError(err, c, others)
	}
	req.Model = c.model.ID
	if c.x == nil {
		c.x = &xcall{}
	}
	c.x.req, c.x.forms = req, make(map[string]*lines.Form, len(others))
	var refused error
	for _, p := range others {
		body, err := xlate.BuildRequest(lineShape(p), req)
		if err != nil {
			var un *xlate.Unsupported
			if !errors.As(err, &un) {
				return translationError(err, c, others)
			}
			refused = cmp.Or(refused, err)
			continue
		}
		c.x.forms[p] = formFor(p, c.model.ID, req.Stream, body)
	}
	if len(c.x.forms) == 0 && !own {
		return translationError(refused, c, others)
	}
	return nil
}

// formFor is a translated body as a line of protocol gets it.
func formFor(protocol, model string, stream bool, body []byte) *lines.Form {
	switch protocol {
	case config.ProtocolAnthropic:
		return &lines.Form{Path: "/v1/messages", Body: body, Version: anthropicVersion, Translated: true}
	case config.ProtocolGemini:
		f := &lines.Form{Path: "/v1beta/models/" + url.PathEscape(model) + ":generateContent", Body: body, Translated: true}
		if stream {
			f.Path, f.RawQuery = "/v1beta/models/"+url.PathEscape(model)+":streamGenerateContent", "alt=sse"
		}
		return f
	default:
		return &lines.Form{Path: "/v1/chat/completions", Body: body, Translated: true}
	}
}

// anthropicVersion is the API version a translated call to an anthropic
// line is sent with.
const anthropicVersion = "2023-06-01"

// translationError is the 400 for a request translation refused.
func translationError(err error, c *call, protocols []string) error {
	var un *xlate.Unsupported
	var inv *xlate.Invalid
	switch {
	case errors.As(err, &un):
		return apierr.BadRequest("body", "%s is not available for model %q on %s: the lines that serve it speak %s, which cannot express it",
			un.Feature, c.model.ID, c.ep.path, strings.Join(protocols, ", "))
	case errors.As(err, &inv):
		return apierr.BadRequest(inv.Field, "%s: %s", apierr.FieldPath(inv.Field), apierr.Bound(inv.Msg, apierr.MaxMessage))
	default:
		return apierr.BadRequest("body", "cannot read the body: %s", apierr.Bound(fmt.Sprint(err), apierr.MaxMessage))
	}
}

// upstreamReader is how the charge of a line's answer is read: its usage,
// stream meter and delivered text, in the upstream's own shape.
type upstreamReader struct {
	usage func(body []byte) (pricing.Usage, bool, error)
	meter func() wire.Meter
	text  func(data []byte) int
}

func readerFor(s xlate.Shape) upstreamReader {
	switch s {
	case xlate.Messages:
		return upstreamReader{wire.MessagesUsage, wire.NewMessagesMeter, wire.MessagesText}
	case xlate.Gemini:
		return upstreamReader{wire.GeminiUsage, wire.NewGeminiMeter, wire.GeminiText}
	default:
		return upstreamReader{wire.ChatUsage, wire.NewChatMeter, wire.ChatText}
	}
}

// translateAnswer turns a line's JSON answer into the caller's shape.
func translateAnswer(c *call, up *upstream, data []byte) ([]byte, error) {
	out, err := xlate.TranslateAnswer(lineShape(up.line.Protocol()), c.ep.shape, data, c.x.req)
	if err != nil {
		return nil, apierr.Errf(http.StatusBadGateway, "upstream_error", "bad_upstream_answer",
			"the provider's answer could not be translated for %s (%s); you were not charged", c.ep.path, apierr.Bound(err.Error(), apierr.MaxMessage))
	}
	return out, nil
}

// translateStatus maps a translated call's upstream error status to what
// the caller's API uses: Anthropic's 529 overloaded is a 503 elsewhere.
func translateStatus(e *apierr.Error) {
	if e.Status == 529 {
		e.Status = http.StatusServiceUnavailable
		e.Type = "server_error"
		e.Code = "overloaded"
	}
}
