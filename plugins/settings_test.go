package plugins

import (
	"strings"
	"testing"
	"time"
)

func TestSettingsResolve(t *testing.T) {
	t.Parallel()
	var s Settings
	if err := s.Resolve("/var/lib/relay"); err != nil {
		t.Fatal(err)
	}
	want := Settings{Dir: "./build/plugins", CacheDir: "/var/lib/relay/wasm-cache", CallTimeout: 250 * time.Millisecond}
	if s != want {
		t.Fatalf("defaults: %+v; want %+v", s, want)
	}
	if err := s.Resolve("/elsewhere"); err != nil || s != want {
		t.Fatalf("a second Resolve changed %+v into %+v (%v)", want, s, err)
	}
	set := Settings{Dir: "p", CacheDir: "c", PoolSize: 3, CallTimeout: time.Second, Poll: -1, IdleRelease: -1}
	got := set
	if err := got.Resolve("d"); err != nil || got != set {
		t.Fatalf("set values: %+v, %v; want them kept", got, err)
	}
	hc := got.HostConfig(nil)
	if hc.Dir != "p" || hc.CacheDir != "c" || hc.PoolSize != 3 || hc.CallTimeout != time.Second || hc.Poll != -1 || hc.IdleRelease != -1 {
		t.Fatalf("HostConfig: %+v", hc)
	}
	bad := Settings{PoolSize: -1}
	if err := bad.Resolve("d"); err == nil || !strings.HasPrefix(err.Error(), "plugins.pool_size:") {
		t.Fatalf("negative pool_size: %v; want an error naming plugins.pool_size", err)
	}
}
