// Command video is ModelRelay's first-party plugin for the video model
// modelc-imagine-video-1.5 on the video_generation endpoint. It validates
// the params the gateway decoded from the request (duration, resolution),
// applies their defaults (8 seconds, 480p) and returns the effective values
// in AdmitResult.Set for the gateway to record, quotes the hold as duration
// × the resolution's per-second price, and charges the seconds and
// resolution the gateway reports once the provider accepted the job. Its
// price list is video.json (pricing.ParseModels format, unit per_second
// with the resolutions 480p, 720p and 1080p), embedded at build time; a
// video.json beside video.wasm replaces it. See README.md for the rules and
// prices.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o video.wasm ./plugins/video
//
// What it must not do: read a clock, files, environment, network or
// randomness; keep anything from one call for the next; see or echo prompt
// or image content (it receives only the params listed above); or price
// with floats.
package main
