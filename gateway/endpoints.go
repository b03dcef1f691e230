package gateway

import (
	"cmp"
	"context"
	"net/http"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/wire"
	"github.com/modelrelay/modelrelay/wire/xlate"
)

// endpoint describes one relayed POST endpoint.
type endpoint struct {
	name     string // the endpoint type (pricing.Endpoint*)
	label    string // the access log's and metrics' endpoint label; "" = name
	path     string
	aliases  []string
	protocol string // the line protocol that serves it
	// shape is the endpoint's wire format when its calls may be
	// translated for lines of other protocols (translate.go); "" never.
	shape   xlate.Shape
	xAPIKey bool  // x-api-key accepted besides Bearer
	maxBody int64 // 0 = limits.max_body_bytes
	decode  wire.Decoder
	usage   func(body []byte) (pricing.Usage, bool, error) // JSON responses
	meter   func() wire.Meter                              // SSE responses
	text    func(data []byte) int                          // delivered text bytes of one SSE event
	// rewrite applies the fields a plugin's quote Set to the forwarded body
	// (nil: the body is forwarded unchanged whatever the plugin sets).
	rewrite func(body []byte, set []abi.Param) ([]byte, error)
	// accept replaces relayJSON for a successful JSON answer (video jobs):
	// a method expression, such as (*relay).acceptVideo.
	accept func(rl *relay, ctx context.Context, w http.ResponseWriter, c *call, up *upstream) error
	// estimate is the usage settled when a JSON answer carries none; nil
	// means the token estimate.
	estimate func(c *call, answer []byte) pricing.Usage
	// uncharged endpoints (count_tokens) are relayed like the others —
	// key, rate limit, model and route checks, the same lines — but hold,
	// charge and journal nothing: see relayUncharged.
	uncharged bool
}

// Label is the endpoint's name in the access log and the metrics.
func (ep *endpoint) Label() string { return cmp.Or(ep.label, ep.name) }

var endpoints = []*endpoint{
	{
		name: pricing.EndpointChat, path: "/v1/chat/completions", protocol: config.ProtocolOpenAI, shape: xlate.Chat,
		decode: wire.JSONOnly(wire.DecodeChat), usage: wire.ChatUsage, meter: wire.NewChatMeter, text: wire.ChatText,
	},
	{
		name: pricing.EndpointResponses, path: "/v1/responses", protocol: config.ProtocolOpenAI, shape: xlate.Responses,
		decode: wire.JSONOnly(wire.DecodeResponses), usage: wire.ResponsesUsage, meter: wire.NewResponsesMeter, text: wire.ResponsesText,
	},
	{
		name: pricing.EndpointMessages, path: "/v1/messages", protocol: config.ProtocolAnthropic, xAPIKey: true, shape: xlate.Messages,
		decode: wire.JSONOnly(wire.DecodeMessages), usage: wire.MessagesUsage, meter: wire.NewMessagesMeter, text: wire.MessagesText,
	},
	{
		// Token counting: the messages models and lines, never charged.
		name: pricing.EndpointMessages, label: "messages_count_tokens", path: "/v1/messages/count_tokens",
		protocol: config.ProtocolAnthropic, xAPIKey: true, decode: wire.JSONOnly(wire.DecodeCountTokens), uncharged: true,
	},
	{
		// Compaction is a responses call on another path: the responses
		// models, their prices and plugin, billed from the usage it returns.
		name: pricing.EndpointResponses, label: "responses_compact", path: "/v1/responses/compact", protocol: config.ProtocolOpenAI,
		decode: wire.JSONOnly(wire.DecodeCompact), usage: wire.ResponsesUsage, meter: wire.NewResponsesMeter, text: wire.ResponsesText,
	},
	{
		name: pricing.EndpointImages, path: "/v1/images/generations", protocol: config.ProtocolOpenAI,
		decode: wire.JSONOnly(wire.DecodeImages), usage: wire.ImagesUsage, meter: wire.NewImagesMeter,
		rewrite: wire.RewriteJSONFields, estimate: noUsage,
	},
	{
		name: pricing.EndpointImageEdit, path: "/v1/images/edits", protocol: config.ProtocolOpenAI, maxBody: maxEditBody,
		decode: wire.DecodeImageEdit, usage: wire.ImagesUsage, meter: wire.NewImagesMeter, estimate: noUsage,
	},
	{
		name: pricing.EndpointVideo, path: "/v1/videos/generations", protocol: config.ProtocolOpenAI,
		decode: wire.JSONOnly(wire.DecodeVideo), accept: (*relay).acceptVideo,
	},
	{
		name: pricing.EndpointSystemOne, path: "/v1/systemone", aliases: []string{"/v1/system_one"},
		protocol: config.ProtocolOpenAI, maxBody: maxSystemOneBody,
		decode: wire.JSONOnly(wire.DecodeSystemOne), usage: wire.SystemOneUsage,
	},
}
