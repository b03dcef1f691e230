package sim

import (
	"net/http"
	"strings"
)

// family is the set of endpoints a model is served by.
type family uint8

const (
	famChat family = 1 << iota
	famResponses
	famMessages
	famImage
	famVideo
	famSystemOne
	famGemini
)

// models is the catalogue of docs/api.md#models in the order Models returns it.
var models = []struct {
	id  string
	fam family
}{
	{"modela-fable-5-1", famChat | famMessages},
	{"modela-sonnet-5-5", famChat | famMessages},
	{"modela-opus-5-5", famChat | famMessages},
	{"modelb-6-astra", famChat | famResponses},
	{"modelb-6.1-sol", famChat | famResponses},
	{"modelc-4.7", famChat | famResponses},
	{"modeld-5.3-Abliterated", famChat},
	{"modele-k3", famChat},
	{"modelf-flash", famChat | famGemini},
	{"modelf-v4-pro", famChat | famGemini},
	{"modelb-image-2.5-sunburst", famImage},
	{"modelb-image-2.5-flare", famImage},
	{"modelc-imagine-video-1.5", famVideo},
	{"sysmodel-1.13.0", famSystemOne},
	{"sysmodel-latest", famSystemOne},
	{"sysmodel-preview", famSystemOne},
}

// catalogue maps a model id to its family.
var catalogue = func() map[string]family {
	m := make(map[string]family, len(models))
	for _, e := range models {
		m[e.id] = e.fam
	}
	return m
}()

// serves reports whether model is served by an endpoint of family f.
func serves(model string, f family) bool { return catalogue[model]&f != 0 }

// Models returns every model id of the catalogue (docs/api.md#models) the sim serves.
func Models() []string {
	out := make([]string, len(models))
	for i, e := range models {
		out[i] = e.id
	}
	return out
}

// modelsCreated is the fixed `created` time of every model in the list.
const modelsCreated = 1767225600 // 2026-01-01T00:00:00Z

// modelList is the body of GET /v1/models, built once.
var modelList = func() []byte {
	b := []byte(`{"object":"list","data":[`)
	for i, e := range models {
		if i > 0 {
			b = append(b, ',')
		}
		owner, _, _ := strings.Cut(e.id, "-")
		b = append(b, `{"id":`...)
		b = appendString(b, e.id)
		b = append(b, `,"object":"model","created":`...)
		b = appendInt(b, modelsCreated)
		b = append(b, `,"owned_by":`...)
		b = appendString(b, owner)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}()

func (s *Server) models(w http.ResponseWriter) { writeJSON(w, http.StatusOK, modelList) }
