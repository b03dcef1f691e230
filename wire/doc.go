// Package wire is the gateway's reading of the providers' and callers' wire
// formats, and nothing else: what it decodes of each endpoint's request
// body (a Summary, or an *Error naming the field that is wrong), the one
// change it makes to a forwarded body (ForceIncludeUsage, and the fields a
// plugin's quote sets: RewriteJSONFields), the framing of a server-sent
// event stream (EventReader, ParseEvent, StripChatUsage), the generated
// text an event delivered (ChatText, ResponsesText, MessagesText), and the
// usage an answer or a stream reports, in every format the gateway relays
// (ChatUsage, ResponsesUsage, MessagesUsage, GeminiUsage, SystemOneUsage,
// ImagesUsage, VideoUsage, and a Meter per stream format); and the writer of the
// gateway's own JSON answers (WriteJSON).
//
// It is pure: it imports the standard library and this module's
// internal/jsonscan, internal/clip, sdk/abi and wire/units only. It must
// not import pricing (it knows token counts, never money), the store, the
// gateway or its error package apierr (which reaches the store;
// apierr.From turns an *Error into the 400 it stands for), nor any
// third-party module. Usage is units.Usage, a leaf of its own, which
// pricing shares without linking this package into the plugins. It does
// no I/O of its own: a stream is read from the io.Reader it is handed, an
// answer written to the http.ResponseWriter. Its errors never quote an answer's
// body, and quote a request's values only through clip's bounds.
package wire
