package shared

import (
	"strings"
	"testing"
	"time"
)

func TestConfigResolve(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == URLEnv {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name string
		in   Config
		env  string
		want Config
		err  string
	}{
		{"absent: no sharing", Config{}, "", Config{Prefix: "relay:", Replicas: 1, Timeout: 100 * time.Millisecond}, ""},
		{"url from the environment", Config{}, "redis://127.0.0.1:6379/0", Config{URL: "redis://127.0.0.1:6379/0", Prefix: "relay:", Replicas: 1, Timeout: 100 * time.Millisecond}, ""},
		{"the file wins", Config{URL: "redis://h:1/2"}, "redis://other:6379", Config{URL: "redis://h:1/2", Prefix: "relay:", Replicas: 1, Timeout: 100 * time.Millisecond}, ""},
		{"all set", Config{URL: "rediss://h:1", Prefix: "prod:", Replicas: 3, Timeout: 50 * time.Millisecond, FailClosed: true}, "", Config{URL: "rediss://h:1", Prefix: "prod:", Replicas: 3, Timeout: 50 * time.Millisecond, FailClosed: true}, ""},
		{"not a redis url", Config{URL: "http://h:1"}, "", Config{}, "redis.url"},
		{"fail_closed without a url", Config{FailClosed: true}, "", Config{}, "redis.fail_closed"},
		{"glob in the prefix", Config{Prefix: "a*"}, "", Config{}, "redis.prefix"},
		{"negative replicas", Config{Replicas: -1}, "", Config{}, "redis.replicas"},
		{"timeout too long", Config{Timeout: time.Minute}, "", Config{}, "redis.timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.in
			err := c.Resolve(env(tc.env))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c != tc.want {
				t.Fatalf("%+v, want %+v", c, tc.want)
			}
			if c.Enabled() != (tc.want.URL != "") {
				t.Fatal("Enabled")
			}
		})
	}
}

// TestURLNotEchoed: a URL that cannot be parsed is not quoted (it may hold a
// password).
func TestURLNotEchoed(t *testing.T) {
	_, err := Open(Config{URL: "redis://user:s3cret@[::1:bad", Prefix: "p:", Replicas: 1, Timeout: time.Millisecond}, nil)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %v", err)
	}
}
