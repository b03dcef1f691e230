// Command loadgen drives ModelRelay's benchmark (`make bench`, bench/run.sh):
// it loads the targets that answer the same chat call — the simulated
// provider directly, a bare httputil.ReverseProxy in front of it (the
// floor), a second one (the A/A control), the gateway and, with
// -gateway-x, a gateway whose line speaks Gemini (every call translated
// there and back) and, with -gateway-pg, a gateway whose ledger is in
// PostgreSQL — and writes the comparison as JSON and markdown.
//
// Phases, each interleaving the targets (their order rotates every round)
// so that drift on the machine hits all of them alike:
//
//   - latency: fixed-rate open-loop attacks (vegeta) of a small
//     non-streaming chat call at each rate, after a warm-up at that rate;
//     p50/p90/p99/max and success ratio per target, overhead = hop − direct
//     at each percentile, and the gateway's overhead over the proxy's;
//   - throughput: vegeta at rate 0 (as fast as possible) with a fixed
//     number of workers and connections (64);
//   - stream: an open-loop rate of streamed calls (SSE); time to the first
//     event (TTFB) and to `data: [DONE]` (total), measured around each read;
//   - rss: a number of concurrent streams held open (against a provider
//     with a long chunk gap) while the proxy's and the gateway's VmRSS are
//     sampled from /proc; VmHWM (peak RSS) is read after every phase.
//
// Percentiles come from vegeta's metrics (a t-digest); the report's values
// are the medians over rounds. With -micro it also reads `go test -bench`
// output and checks the plugin time per request (BenchmarkRequest).
//
// What it must not do: talk to anything but the URLs it is given (the
// benchmark binds everything to 127.0.0.1 inside a private network
// namespace), keep response bodies, or print prompt or completion text. It
// is a benchmark tool, not part of the product.
package main
