package config

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// RetryConfig bounds the tries of one call across lines, the circuit
// breaker of each line, the retries of the whole gateway, and what happens
// when every line of a pool is open (see RATIONALE.md, "A sick pool degrades").
type RetryConfig struct {
	// MaxTries is the most upstream attempts per call. Default 0: one per
	// line of the call's plan, and at least 3.
	MaxTries int `yaml:"max_tries"`
	// MaxTime is the most time spent trying before the first byte. Default 30s.
	MaxTime time.Duration `yaml:"max_time"`
	// BackoffMin and BackoffMax bound the wait before trying the same line
	// again. Defaults 10ms and 500ms.
	BackoffMin time.Duration `yaml:"backoff_min"`
	BackoffMax time.Duration `yaml:"backoff_max"`
	// BreakerFailureRatio is the share of failed tries, over BreakerWindow,
	// that opens a line's breaker. Default 0.8: a line failing every request
	// opens after BreakerMinRequests tries; a line failing half at random
	// practically never does (0.65% while its first 20 tries come in).
	BreakerFailureRatio float64 `yaml:"breaker_failure_ratio"`
	// BreakerMinRequests is how many tries must have finished on a line
	// within BreakerWindow before its failure ratio can open it. Default 20.
	BreakerMinRequests uint32 `yaml:"breaker_min_requests"`
	// BreakerWindow is the rolling window (in ten buckets) the failure
	// ratio, and the success ratio that ranks lines in panic mode, are
	// counted over. Default 10s.
	BreakerWindow time.Duration `yaml:"breaker_window"`
	// BreakerOpen is how long a breaker stays open before one half-open
	// probe. Default 10s.
	BreakerOpen time.Duration `yaml:"breaker_open"`
	// BudgetRatio bounds the retries of the whole gateway: over the last 10
	// seconds, retries ≤ BudgetRatio × first tries + BudgetMinPerSecond × 10.
	// A call past it does not retry and answers with its last failure.
	// Default 1.0 (retries at most double the load on a sick pool; a pool
	// failing half its requests needs 0.75 retries per call with 3 tries).
	BudgetRatio float64 `yaml:"budget_ratio"`
	// BudgetMinPerSecond is the floor of the retry budget, so that a
	// quiet gateway can still retry. Default 10; negative: no floor.
	BudgetMinPerSecond float64 `yaml:"budget_min_per_second"`
	// PanicShare is the share of calls still sent, when every line serving
	// a call is open, to the lines that succeeded within BreakerWindow,
	// best success ratio first (Envoy's panic mode). Default 0.5; 0 turns
	// panic mode off (every such call gets 503 at once).
	PanicShare *float64 `yaml:"panic_share"`
	// Max429Wait is the longest Retry-After (or retry-after-ms) of a
	// provider's 429 that the gateway waits out itself, when no other line
	// of the plan can take the call, before trying that line again; a
	// longer one reaches the caller as 429 with its Retry-After. The wait
	// must also fit in what is left of MaxTime, and the try after it counts
	// against MaxTries and the retry budget. Default 10s; negative: a 429
	// is never waited out.
	Max429Wait time.Duration `yaml:"max_429_wait"`
	// AffinityTTL is how long a conversation (a call with a
	// prompt_cache_key, an Anthropic metadata.user_id, or a session_id or
	// x-claude-code-session-id header) remembers the line that last
	// answered it: its next calls go to that line first while its breaker
	// allows, so the provider's prompt cache of that account is hit. At most
	// 100,000 conversations are remembered. Default 1h (the longest prompt
	// cache lifetime providers offer); negative: no affinity.
	AffinityTTL time.Duration `yaml:"affinity_ttl"`
}

func (r *RetryConfig) resolve() error {
	if r.MaxTries < 0 {
		return errors.New("config: retry.max_tries: must not be negative (0: one per line of the plan, at least 3)")
	}
	if r.MaxTime == 0 {
		r.MaxTime = 30 * time.Second
	}
	if r.BackoffMin == 0 {
		r.BackoffMin = 10 * time.Millisecond
	}
	if r.BackoffMax == 0 {
		r.BackoffMax = 500 * time.Millisecond
	}
	if r.BackoffMax < r.BackoffMin {
		return errors.New("config: retry.backoff_max: must not be below retry.backoff_min")
	}
	if r.BreakerFailureRatio == 0 {
		r.BreakerFailureRatio = 0.8
	}
	if !(r.BreakerFailureRatio > 0 && r.BreakerFailureRatio <= 1) {
		return fmt.Errorf("config: retry.breaker_failure_ratio: %v is not within (0, 1]", r.BreakerFailureRatio)
	}
	if r.BreakerMinRequests == 0 {
		r.BreakerMinRequests = 20
	}
	if r.BreakerWindow == 0 {
		r.BreakerWindow = 10 * time.Second
	}
	if r.BreakerWindow < 10*time.Millisecond {
		return errors.New("config: retry.breaker_window: must be at least 10ms")
	}
	if r.BreakerOpen == 0 {
		r.BreakerOpen = 10 * time.Second
	}
	if r.BreakerOpen < 0 {
		return errors.New("config: retry.breaker_open: must not be negative")
	}
	if r.BudgetRatio == 0 {
		r.BudgetRatio = 1
	}
	if r.BudgetRatio < 0 || math.IsNaN(r.BudgetRatio) {
		return errors.New("config: retry.budget_ratio: must not be negative")
	}
	if r.BudgetMinPerSecond == 0 {
		r.BudgetMinPerSecond = 10
	}
	if math.IsNaN(r.BudgetMinPerSecond) {
		return errors.New("config: retry.budget_min_per_second: not a number")
	}
	if r.PanicShare == nil {
		share := 0.5
		r.PanicShare = &share
	}
	if !(*r.PanicShare >= 0 && *r.PanicShare <= 1) {
		return fmt.Errorf("config: retry.panic_share: %v is not within 0..1", *r.PanicShare)
	}
	if r.Max429Wait == 0 {
		r.Max429Wait = 10 * time.Second
	}
	if r.AffinityTTL == 0 {
		r.AffinityTTL = time.Hour
	}
	return nil
}

// tries is the most tries of a call whose plan has n lines.
func (r *RetryConfig) Tries(n int) int {
	if r.MaxTries > 0 {
		return r.MaxTries
	}
	return max(n, 3)
}
