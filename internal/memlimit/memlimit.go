// Package memlimit is the gateway process's soft memory limit: the
// memory_limit key of the configuration, its parsing and its application
// to the Go runtime (runtime/debug.SetMemoryLimit). It must not read or
// change anything else of the process.
package memlimit

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Config is the memory_limit key of the configuration.
type Config struct {
	// Limit is the Go runtime's soft memory limit for the gateway
	// process (runtime/debug.SetMemoryLimit): "192MiB", "1GiB", "500MB", a
	// number of bytes, or "off". Default "192MiB". The garbage collector
	// works harder as the heap nears it instead of letting the heap grow to
	// twice its live size; it is soft (the process may exceed it rather than
	// fail). The GOMEMLIMIT environment variable, when set, wins. It covers
	// only the Go runtime's memory: the resident set adds about 14 MB of
	// native code per loaded plugin and the ledger's mapped files. 144MiB
	// was measured too: 180 MB instead of ~200 MB with 1,000 open streams,
	// but after an overload (4,000 requests/s) the live heap sat at that
	// limit, the collector ran without pause and the gateway did not recover
	// at 2,000/s (1,083/s served, p99 5.7 s); at 192MiB it did (BENCHMARKS.md).
	Limit string `yaml:"memory_limit"`
	// Bytes is Limit resolved; 0 means no limit.
	Bytes int64 `yaml:"-"`
}

// minLimit is the least limit the gateway starts under.
const minLimit = 32 << 20

// Resolve fills the default and parses Limit into Bytes. Its errors name
// the key (memory_limit). It is idempotent.
func (c *Config) Resolve() error {
	if c.Limit == "" {
		c.Limit = "192MiB"
	}
	n, err := ParseSize(c.Limit)
	if err != nil {
		return fmt.Errorf("memory_limit: %w", err)
	}
	if n != 0 && n < minLimit {
		return fmt.Errorf("memory_limit: %s is below the 32MiB the gateway needs to start", c.Limit)
	}
	c.Bytes = n
	return nil
}

// Apply sets the runtime's soft memory limit from Bytes, unless GOMEMLIMIT
// is set in the environment (the runtime has applied it), and logs which
// one holds.
func (c Config) Apply(log *slog.Logger) {
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		log.Info("memory limit from GOMEMLIMIT", "GOMEMLIMIT", env)
		return
	}
	if c.Bytes == 0 {
		return
	}
	debug.SetMemoryLimit(c.Bytes)
	log.Info("memory limit set", "bytes", c.Bytes)
}

// ParseSize parses a byte size: a number of bytes, or a number with one of
// the units KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024);
// "off" and "0" are 0.
func ParseSize(text string) (int64, error) {
	t := strings.TrimSpace(text)
	if t == "off" {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size like 192MiB, 1GiB, 500MB or off", text)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large", text)
	}
	return n * mult, nil
}
