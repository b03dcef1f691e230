package config

import (
	"errors"
	"fmt"
	"time"
)

// LimitsConfig holds request limits and rate limits.
type LimitsConfig struct {
	// MaxBodyBytes caps a request body. Default 16 MiB (the typed-question
	// endpoint is always capped at 1 MiB, docs/api.md#limits).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// KeyRate is the default token bucket per key. Default 50/s, burst 100.
	KeyRate RateConfig `yaml:"key_rate"`
	// PricingRate is the token bucket per client address on /api/pricing.
	// Default 5/s, burst 20.
	PricingRate RateConfig `yaml:"pricing_rate"`
	// OverloadDelay is the queueing delay (how long the gateway's goroutines
	// wait for a CPU: the 99th percentile of each 25 ms window) past which,
	// once it has lasted 100 ms, a growing share of new relayed calls is
	// refused with 503 "overloaded" and Retry-After: 1 (shed.go). Default
	// 100ms; negative never sheds.
	OverloadDelay time.Duration `yaml:"overload_delay"`
}

func (l *LimitsConfig) resolve() error {
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = 16 << 20
	}
	if l.MaxBodyBytes < 1024 {
		return errors.New("config: limits.max_body_bytes: must be at least 1024")
	}
	if err := l.KeyRate.resolve("limits.key_rate", 50, 100); err != nil {
		return err
	}
	if err := l.PricingRate.resolve("limits.pricing_rate", 5, 20); err != nil {
		return err
	}
	if l.OverloadDelay == 0 {
		l.OverloadDelay = 100 * time.Millisecond
	}
	return nil
}

// RateConfig is a token bucket: Rate tokens per second, up to Burst.
type RateConfig struct {
	Rate  float64 `yaml:"rate"`
	Burst int     `yaml:"burst"`
}

func (r *RateConfig) resolve(key string, rate float64, burst int) error {
	if r.Rate == 0 {
		r.Rate = rate
	}
	if r.Burst == 0 {
		r.Burst = burst
	}
	if r.Rate < 0 {
		return fmt.Errorf("config: %s.rate: must be positive", key)
	}
	if r.Burst < 1 {
		return fmt.Errorf("config: %s.burst: must be at least 1", key)
	}
	return nil
}
