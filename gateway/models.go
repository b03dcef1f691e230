package gateway

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/wire"
)

// modelsCreated is the creation time every listed model shows: the API's
// version date (docs/api.md#versioning), 2025-09-19T00:00:00Z (the catalogue keeps no dates).
var modelsCreated = time.Unix(1758240000, 0).UTC()

// handleModels lists the models the key's route serves (docs/api.md#endpoints):
// in the Anthropic model-list shape when the request carries
// anthropic-version (or vendorx-version), as the message-API SDKs and tools
// send it, else in the OpenAI shape. The key is a Bearer token either way.
func (g *Gateway) handleModels(w http.ResponseWriter, r *http.Request, _ httprouter.Params, info *reqInfo) error {
	k, err := g.authenticate(r.Context(), r, false, info)
	if err != nil {
		return err
	}
	var ids []string
	var served [][]string
	for _, m := range g.host.Catalog().Models() {
		if keyMayCall(k, m) {
			ids = append(ids, m.ID)
			served = append(served, servedEndpoints(&g.cfg, m, keyRoute(k, m)))
		}
	}
	if versionHeader(r) != "" {
		return writeAnthropicModels(w, r.URL.Query(), ids)
	}
	type item struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
		// Endpoints is where the key can call the model: its catalogue's
		// endpoints and those the configuration's serve entries add.
		Endpoints []string `json:"supported_endpoint_types"`
	}
	data := make([]item, len(ids))
	for i, id := range ids {
		data[i] = item{ID: id, Object: "model", Created: modelsCreated.Unix(), OwnedBy: ownerOf(id), Endpoints: served[i]}
	}
	return wire.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// anthropicModel is an item of the Anthropic model list.
type anthropicModel struct {
	Type        string `json:"type"` // always "model"
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"` // RFC 3339
}

// anthropicModelList is the Anthropic model-list page.
type anthropicModelList struct {
	Data    []anthropicModel `json:"data"`
	HasMore bool             `json:"has_more"`
	FirstID *string          `json:"first_id"`
	LastID  *string          `json:"last_id"`
}

func writeAnthropicModels(w http.ResponseWriter, q url.Values, ids []string) error {
	from, to, more, err := modelPage(q, ids)
	if err != nil {
		return err
	}
	out := anthropicModelList{Data: make([]anthropicModel, 0, to-from), HasMore: more}
	created := modelsCreated.Format(time.RFC3339)
	for _, id := range ids[from:to] {
		out.Data = append(out.Data, anthropicModel{Type: "model", ID: id, DisplayName: id, CreatedAt: created})
	}
	if to > from {
		out.FirstID, out.LastID = &ids[from], &ids[to-1]
	}
	return wire.WriteJSON(w, http.StatusOK, out)
}

// Bounds of the Anthropic list's limit parameter.
const (
	defaultModelPage = 20
	maxModelPage     = 1000
)

// modelPage reads the Anthropic list's paging parameters — limit (1 to
// 1000, default 20), after_id, before_id (at most one of the two) — and
// returns the page ids[from:to] and whether more models lie beyond it in
// the direction of paging (after the page, or before it with before_id).
func modelPage(q url.Values, ids []string) (from, to int, more bool, err error) {
	limit := defaultModelPage
	if v := q.Get("limit"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 || n > maxModelPage {
			return 0, 0, false, apierr.BadRequest("limit", "limit must be an integer from 1 to %d", maxModelPage)
		}
		limit = n
	}
	after, before := q.Get("after_id"), q.Get("before_id")
	if after != "" && before != "" {
		return 0, 0, false, apierr.BadRequest("before_id", "give after_id or before_id, not both")
	}
	index := func(field, id string) (int, error) {
		for i, x := range ids {
			if x == id {
				return i, nil
			}
		}
		return 0, apierr.BadRequest(field, "%s: %s is not a model this key can list", field, apierr.Quote(apierr.Bound(strings.TrimSpace(id), 64)))
	}
	switch {
	case before != "":
		end, err := index("before_id", before)
		if err != nil {
			return 0, 0, false, err
		}
		start := max(end-limit, 0)
		return start, end, start > 0, nil
	case after != "":
		i, err := index("after_id", after)
		if err != nil {
			return 0, 0, false, err
		}
		from = i + 1
	}
	to = min(from+limit, len(ids))
	return from, to, to < len(ids), nil
}

// handleResponsesGet answers a GET on /v1/responses. A WebSocket upgrade
// (Codex tries its responses WebSocket transport first) gets 426 at once,
// in the error shape and before any key check: Codex falls back to HTTP on
// a 426 without retrying the WebSocket. Any other GET gets the 405 the
// router gives every wrong method.
func (g *Gateway) handleResponsesGet(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *reqInfo) error {
	if !wantsWebSocket(r) {
		w.Header().Set("Allow", http.MethodPost)
		return apierr.Errf(http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed",
			"method \"GET\" is not allowed on \"/v1/responses\" (allowed: POST)")
	}
	e := apierr.Errf(http.StatusUpgradeRequired, "invalid_request_error", "websocket_not_supported",
		"WebSocket is not served on /v1/responses: send the request as an HTTP POST (with \"stream\": true for events)")
	e.Hint = apierr.HintNoRetry
	return e
}

// wantsWebSocket reports whether r asks to upgrade to WebSocket.
func wantsWebSocket(r *http.Request) bool {
	for _, v := range r.Header.Values("Upgrade") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "websocket") {
				return true
			}
		}
	}
	return false
}

func keyMayCall(k store.Key, m pricing.Model) bool {
	if contains(k.Exclude, m.ID) {
		return false
	}
	if k.Route == store.AutoRoute {
		return true
	}
	_, ok := m.Routes[k.Route]
	return ok
}

// ownerOf is the vendor word before the first '-' of a model id.
func ownerOf(id string) string {
	if i := strings.IndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}
