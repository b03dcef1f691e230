package store

import (
	"strings"
	"testing"
	"time"
)

func TestConfigResolve(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == DatabaseURLEnv {
				return v
			}
			return ""
		}
	}
	var c Config
	if err := c.Resolve(env("")); err != nil || c.Driver != DriverBadger {
		t.Fatalf("zero config: %+v, %v; want badger", c, err)
	}
	c = Config{Driver: DriverPostgres}
	if err := c.Resolve(env("postgres://db/relay")); err != nil {
		t.Fatal(err)
	}
	if c.DSN != "postgres://db/relay" || c.MaxConns != 16 || c.StatementTimeout != 5*time.Second || c.Lease != 30*time.Second {
		t.Fatalf("postgres defaults: %+v", c)
	}
	c = Config{Driver: DriverPostgres, DSN: "postgres://cfg/relay"}
	if err := c.Resolve(env("postgres://env/relay")); err != nil || c.DSN != "postgres://cfg/relay" {
		t.Fatalf("the config's dsn must win over %s: %+v, %v", DatabaseURLEnv, c, err)
	}
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Driver: "mysql"}, "store.driver"},
		{Config{Driver: strings.Repeat("x", 10000)}, "store.driver"},
		{Config{Driver: DriverPostgres}, "store.dsn: required"},
		{Config{DSN: "postgres://x"}, "store.dsn: set, but store.driver"},
		{Config{Driver: DriverPostgres, DSN: "d", MaxConns: 1}, "store.max_conns"},
		{Config{Driver: DriverPostgres, DSN: "d", StatementTimeout: -1}, "store.statement_timeout"},
		{Config{Driver: DriverPostgres, DSN: "d", Lease: time.Millisecond}, "store.lease"},
	} {
		err := tc.c.Resolve(env(""))
		if err == nil || !strings.Contains(err.Error(), tc.want) || len(err.Error()) > 300 {
			t.Errorf("%+.60v: %v; want an error naming %s, bounded", tc.c, err, tc.want)
		}
	}
}

func TestLocalConfigResolve(t *testing.T) {
	var c LocalConfig
	if err := c.Resolve(); err != nil || c.DataDir != "./data" || c.SyncWrites == nil || *c.SyncWrites {
		t.Fatalf("defaults: %+v, %v; want ./data without sync writes", c, err)
	}
	on := true
	c = LocalConfig{DataDir: "/var/lib/relay", SyncWrites: &on}
	if err := c.Resolve(); err != nil || c.DataDir != "/var/lib/relay" || !*c.SyncWrites {
		t.Fatalf("set values: %+v, %v; want them kept", c, err)
	}
}
