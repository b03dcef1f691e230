package logagg_test

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/modelrelay/modelrelay/internal/logagg"
)

// A storm of one warning is its first record and, when the interval ends
// (here at Close), one summary with the last record's attributes.
func ExampleNew() {
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	h := logagg.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime}), 10*time.Second)
	log := slog.New(h)
	for i := range 25000 {
		log.Warn("settle: the store is unavailable; retrying until it answers", "request_id", fmt.Sprintf("r%05d", i))
	}
	log.Info("request", "request_id", "r25000", "status", 200)
	h.Close()
	// Output:
	// {"level":"WARN","msg":"settle: the store is unavailable; retrying until it answers","request_id":"r00000"}
	// {"level":"INFO","msg":"request","request_id":"r25000","status":200}
	// {"level":"WARN","msg":"settle: the store is unavailable; retrying until it answers","request_id":"r24999","repeated":24999,"interval":"10s"}
}
