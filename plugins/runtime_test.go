package plugins

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestStderrLog(t *testing.T) {
	var out bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w := newStderrLog(logger, "p")
	for _, chunk := range []string{"pan", "ic: boom\n", "goroutine 1", " [running]:\n"} {
		if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	logged := out.String()
	if !strings.Contains(logged, `line="panic: boom"`) || !strings.Contains(logged, `line="goroutine 1 [running]:"`) {
		t.Errorf("not logged line by line:\n%s", logged)
	}
	if got := w.last(); got != "panic: boom\ngoroutine 1 [running]:\n" {
		t.Errorf("last() = %q", got)
	}

	t.Run("bounded", func(t *testing.T) {
		out.Reset()
		w := newStderrLog(logger, "p")
		line := strings.Repeat("x", 100) + "\n"
		for range 1000 {
			w.Write([]byte(line))
		}
		if out.Len() > 2*stderrBudget {
			t.Errorf("logged %d bytes for a %d-byte budget", out.Len(), stderrBudget)
		}
		if len(w.last()) != stderrTail {
			t.Errorf("tail holds %d bytes, want %d", len(w.last()), stderrTail)
		}
	})
	t.Run("silent above debug", func(t *testing.T) {
		var quiet bytes.Buffer
		w := newStderrLog(slog.New(slog.NewTextHandler(&quiet, nil)), "p")
		w.Write([]byte("fatal error: out of memory\n"))
		if quiet.Len() != 0 {
			t.Errorf("logged at info level: %s", quiet.String())
		}
		if !strings.Contains(w.last(), "out of memory") {
			t.Errorf("tail lost: %q", w.last())
		}
	})
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := Config{Dir: "x"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PoolSize != 2 || cfg.CallTimeout != DefaultCallTimeout || cfg.MemoryLimitPages != 1024 ||
		cfg.RecycleCalls != 1_000_000 || cfg.RecycleBytes != 32<<20 || cfg.Poll != DefaultPoll || cfg.IdleRelease != DefaultIdleRelease || cfg.Logger == nil {
		t.Errorf("defaults = %+v", cfg)
	}
	bad := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"pool size", Config{PoolSize: -1}, "PoolSize"},
		{"call timeout", Config{CallTimeout: -1}, "CallTimeout"},
		{"recycle calls", Config{RecycleCalls: -5}, "RecycleCalls"},
		{"memory limit", Config{MemoryLimitPages: 70000}, "MemoryLimitPages"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.cfg.withDefaults(); err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("err = %v, want one naming %s", err, tc.field)
			}
		})
	}
}
