// Command bareproxy is the floor of the gateway benchmark: a
// net/http/httputil.ReverseProxy in front of one upstream (the simulated
// provider), with nothing else — no authentication, no body decoding, no
// ledger, no plugins. The gateway's added latency is compared with this
// proxy's, so that the benchmark separates what any Go HTTP hop costs from
// what ModelRelay itself costs.
//
// It flushes every write (FlushInterval -1, so streams are relayed chunk by
// chunk as the gateway relays them) and pools upstream connections with the
// same limits as a gateway line (1024 idle, 512 per host), so neither side
// is handicapped by connection churn. It serves in full-duplex mode
// (http.ResponseController.EnableFullDuplex): without it a plain
// ReverseProxy cuts about 0.5% of streams (golang/go#40747, see newHandler).
//
// What it must not do: anything beyond relaying. It logs nothing per
// request, reads no body and binds only the address it is given (the
// benchmark gives it 127.0.0.1). It is not part of the product.
package main
