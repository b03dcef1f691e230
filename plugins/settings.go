package plugins

import (
	"errors"
	"log/slog"
	"time"
)

// Settings is the plugins: section of relay.yaml: the part of a Host's
// Config an operator sets. Resolve fills its defaults, which differ from
// Config's where a gateway needs more room than a bare Host (CallTimeout);
// HostConfig turns it into the Config the gateway's Host opens with.
type Settings struct {
	// Dir is the plugin directory: NAME.wasm with an optional NAME.json. Default "./build/plugins".
	Dir string `yaml:"dir"`
	// CacheDir is wazero's compilation cache, with the metered modules in
	// its subdirectory metered. Default "<data_dir>/wasm-cache".
	CacheDir string `yaml:"cache_dir"`
	// PoolSize is the number of instances per plugin. Default 2.
	PoolSize int `yaml:"pool_size"`
	// CallTimeout bounds one plugin call (a looping plugin is stopped there).
	// Default DefaultCallTimeout, 250ms.
	CallTimeout time.Duration `yaml:"call_timeout"`
	// Poll is how often the directory is checked for changes. Default 1s; negative disables reloading.
	Poll time.Duration `yaml:"poll"`
	// IdleRelease parks a plugin that has had no call for this long: its
	// compiled code and instances are released (about 26 MB each) and its
	// next call loads it again (about 0.15 s). Default 1m; negative never parks.
	IdleRelease time.Duration `yaml:"idle_release"`
}

// Resolve fills the defaults and checks the values; dataDir is the
// configuration's data_dir, under which the compilation cache goes by
// default. Its errors name the key (plugins.pool_size). It is idempotent.
func (s *Settings) Resolve(dataDir string) error {
	if s.Dir == "" {
		s.Dir = "./build/plugins"
	}
	if s.CacheDir == "" {
		s.CacheDir = dataDir + "/wasm-cache"
	}
	if s.CallTimeout == 0 {
		s.CallTimeout = DefaultCallTimeout
	}
	if s.PoolSize < 0 {
		return errors.New("plugins.pool_size: must not be negative")
	}
	return nil
}

// HostConfig is the Config for these settings, with log as the host's
// logger: what relay serve opens the plugin host with.
func (s Settings) HostConfig(log *slog.Logger) Config {
	return Config{
		Dir:         s.Dir,
		CacheDir:    s.CacheDir,
		PoolSize:    s.PoolSize,
		CallTimeout: s.CallTimeout,
		Poll:        s.Poll,
		IdleRelease: s.IdleRelease,
		Logger:      log,
	}
}
