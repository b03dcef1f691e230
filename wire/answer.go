package wire

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// WriteJSON answers with status and v as JSON, on a line of its own, with
// its Content-Length.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return nil
}
