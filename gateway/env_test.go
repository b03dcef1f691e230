package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/internal/shared"
	"github.com/modelrelay/modelrelay/plugins"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/store/badger"
	"github.com/modelrelay/modelrelay/store/postgres"
	"github.com/modelrelay/modelrelay/store/postgres/pgtest"
)

// pluginDir holds the first-party plugins the tests load: RELAY_PLUGIN_DIR
// (make test builds it) or a directory TestMain builds them into.
var pluginDir string

func TestMain(m *testing.M) {
	code := func() int {
		pluginDir = os.Getenv("RELAY_PLUGIN_DIR")
		if pluginDir == "" || !hasWasm(pluginDir) {
			dir, err := os.MkdirTemp("", "relay-plugins-")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(dir)
			if err := buildPlugins(dir); err != nil {
				fmt.Fprintln(os.Stderr, "build plugins:", err)
				return 1
			}
			pluginDir = dir
		}
		return m.Run()
	}()
	os.Exit(code)
}

func hasWasm(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.wasm"))
	return len(m) > 0
}

// moduleRoot is the repository root (the directory of go.mod).
func moduleRoot() string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return ".."
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

func buildPlugins(dir string) error {
	root := moduleRoot()
	mains, _ := filepath.Glob(filepath.Join(root, "plugins", "*", "main.go"))
	for _, m := range mains {
		name := filepath.Base(filepath.Dir(m))
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", filepath.Join(dir, name+".wasm"), "./plugins/"+name)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", name, err, out)
		}
		if cfg, err := os.ReadFile(filepath.Join(root, "plugins", name, name+".json")); err == nil {
			if err := os.WriteFile(filepath.Join(dir, name+".json"), cfg, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// wasmCache is fixed at start-up (tests may change TMPDIR).
var wasmCacheDir = func() string {
	if d := os.Getenv("RELAY_WASM_CACHE"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "relay-test-wasm-cache")
}()

func wasmCache() string { return wasmCacheDir }

const testAdminToken = "test-admin-token-0123456789"

// envLogLevel is the level of the test gateway's log: debug for tests (they
// read breaker and plugin messages), info — production's — for benchmarks.
var envLogLevel = slog.LevelDebug

// lockedBuffer collects logs from many goroutines. A benchmark sets
// discard: the lines are still formatted, as in production, but not kept
// (a buffer doubling under 20,000 access-log lines would be most of what a
// call allocates).
type lockedBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	discard atomic.Bool
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	if l.discard.Load() {
		return len(p), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// env is a whole gateway in front of simulated providers, on real Badger
// and real plugins.
type env struct {
	t       testing.TB
	sims    map[string]*sim.Server // by line name
	simURLs map[string]string
	store   store.Store
	host    *plugins.Host
	gw      *Gateway
	srv     *httptest.Server
	url     string
	logs    *lockedBuffer
	dataDir string
	pgDSN   string // the env's database, on PostgreSQL
	cfg     config.Config
	sh      *shared.Client // with redis.url
}

// envVideoStep is one step of the env's simulated video jobs.
const envVideoStep = 250 * time.Millisecond

type envOption func(*config.Config)

// newEnv starts one sim per line. By default: route standard with lines
// std-a (priority 0) and std-msg (anthropic), route economy with eco-a.
func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	return newEnvOn(t, os.Getenv(envStoreVar), opts...)
}

// newEnvOn is newEnv on the store driver names (store.DriverPostgres, else
// Badger): a test that needs PostgreSQL asks for it here rather than with
// t.Setenv(envStoreVar), and so can run in parallel.
func newEnvOn(t testing.TB, driver string, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, sims: map[string]*sim.Server{}, simURLs: map[string]string{}, logs: &lockedBuffer{}}
	e.dataDir = t.TempDir()
	cfg := config.Config{
		Listen:       "127.0.0.1:0",
		LocalConfig:  store.LocalConfig{DataDir: e.dataDir},
		SupportEmail: "help@relay.test",
		AdminToken:   testAdminToken,
		Plugins:      plugins.Settings{Dir: pluginDir, CacheDir: wasmCache(), Poll: -1},
		Routes:       []config.RouteConfig{{Name: "standard"}, {Name: "economy"}},
		Lines: []config.LineConfig{
			{Name: "std-a", Protocol: config.ProtocolOpenAI, Models: []string{"*"}, Route: "standard"},
			{Name: "std-msg", Protocol: config.ProtocolAnthropic, Models: []string{"*"}, Route: "standard"},
			{Name: "eco-a", Protocol: config.ProtocolOpenAI, Models: []string{"*"}, Route: "economy"},
		},
		// No shedding: a loaded machine running the tests under -race
		// must not turn other tests' calls into 503s (TestOverloadSheds
		// turns it on).
		Limits: config.LimitsConfig{KeyRate: config.RateConfig{Rate: 10000, Burst: 10000}, OverloadDelay: -1},
		// Every test client is 127.0.0.1: no bound per address.
		Server: config.ServerConfig{MaxConnectionsPerAddress: -1},
		Retry:  config.RetryConfig{BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond},
	}
	f := false
	cfg.SyncWrites = &f
	for _, o := range opts {
		o(&cfg)
	}
	for i := range cfg.Lines {
		l := &cfg.Lines[i]
		if l.BaseURL == "" {
			// A video job is final three steps after it is made: long
			// enough that TestVideoJobs reads it unfinished first, even
			// under -race beside the tests running in parallel.
			s := sim.New(sim.Options{VideoSteps: envVideoStep})
			hs := httptest.NewServer(s)
			t.Cleanup(hs.Close)
			t.Cleanup(s.Close)
			e.sims[l.Name] = s
			e.simURLs[l.Name] = hs.URL
			l.BaseURL = hs.URL
		}
	}
	if err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg
	log := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: envLogLevel}))
	st := e.openStore(t, log, driver)
	e.store = st
	host, shared, err := openHost(cfg.Plugins, log)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	e.host = host
	e.sh = openShared(t, cfg, log)
	gw, err := New(Options{Config: cfg, Store: st, Plugins: host, Logger: log, Shared: e.sh})
	if err != nil {
		t.Fatal(err)
	}
	e.serve(gw)
	t.Cleanup(func() {
		checkNoneUncharged(t, gw)
		e.srv.Close()
		if e.sh != nil {
			e.sh.Close()
		}
		if !shared {
			host.Close(context.Background())
		}
		st.Close()
	})
	return e
}

// The package's tests share one plugin host per plugins.Settings while
// they load the built plugins (pluginDir) unchanged: opening a host
// instantiates every plugin's pool, about 5 s under -race, and the host
// keeps no state a test can change without its own plugin files (a test
// that reloads or swaps plugins names a directory of its own, and gets a
// host of its own, closed with its env). The shared hosts log to
// sharedHostLogs.
var (
	sharedHostsMu  sync.Mutex
	sharedHosts    = map[plugins.Settings]*plugins.Host{}
	sharedHostLogs = &lockedBuffer{}
)

// openHost opens the host of settings: a shared one (shared true, never
// closed) for the built plugins, else one of the env's own on log.
func openHost(settings plugins.Settings, log *slog.Logger) (h *plugins.Host, shared bool, err error) {
	if settings.Dir != pluginDir {
		h, err = plugins.Open(context.Background(), settings.HostConfig(log)) // Poll -1: no reloading
		return h, false, err
	}
	sharedHostsMu.Lock()
	defer sharedHostsMu.Unlock()
	if h := sharedHosts[settings]; h != nil {
		return h, true, nil
	}
	hlog := slog.New(slog.NewJSONHandler(sharedHostLogs, &slog.HandlerOptions{Level: envLogLevel}))
	h, err = plugins.Open(context.Background(), settings.HostConfig(hlog))
	if err != nil {
		return nil, false, err
	}
	sharedHosts[settings] = h
	return h, true, nil
}

// serve serves gw as e's gateway, as relay serve serves it: its deadlines
// and bounded listener.
func (e *env) serve(gw *Gateway) {
	e.gw = gw
	e.srv = httptest.NewUnstartedServer(gw.Handler())
	gw.ConfigureServer(e.srv.Config)
	e.srv.Listener = gw.Listener(e.srv.Listener)
	e.srv.Start()
	e.url = e.srv.URL
}

// openShared opens the Redis client cfg names (nil without redis.url).
func openShared(t testing.TB, cfg config.Config, log *slog.Logger) *shared.Client {
	t.Helper()
	if !cfg.Redis.Enabled() {
		return nil
	}
	sh, err := shared.Open(cfg.Redis, log)
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// replica starts another Gateway on e's store, plugins and providers, with
// its own key cache, limiters, settling and (with redis.url) its own Redis
// client: a second replica behind the same load balancer. st, when not
// nil, wraps the shared store for this replica only.
func (e *env) replica(wrap func(Store) Store) *env {
	t := e.t
	t.Helper()
	r := *e
	r.logs = &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: envLogLevel}))
	var st Store = e.store
	if wrap != nil {
		st = wrap(st)
	}
	r.sh = openShared(t, e.cfg, log)
	gw, err := New(Options{Config: e.cfg, Store: st, Plugins: e.host, Logger: log, Shared: r.sh})
	if err != nil {
		t.Fatal(err)
	}
	r.serve(gw)
	t.Cleanup(func() {
		checkNoneUncharged(t, gw)
		r.srv.Close()
		if r.sh != nil {
			r.sh.Close()
		}
	})
	return &r
}

// envStoreVar names the store the gateway tests run on: unset or "badger"
// (default), or "postgres" — then every env gets a database of its own on
// the server RELAY_TEST_POSTGRES names (`make test-postgres`).
const envStoreVar = "RELAY_TEST_GATEWAY_STORE"

func (e *env) openStore(t testing.TB, log *slog.Logger, driver string) store.Store {
	t.Helper()
	if driver == store.DriverPostgres {
		dsn := pgtest.Database(t, "relay_gateway")
		e.pgDSN = dsn
		st, err := postgres.Open(context.Background(), dsn, postgres.Options{Logger: log, MaxConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st, err := badger.Open(filepath.Join(e.dataDir, "ledger"), badger.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// atRest is everything the env's store keeps, by where it is: each file
// under the data directory, or on PostgreSQL each table's rows as text.
func (e *env) atRest(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	if e.pgDSN != "" {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, e.pgDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = current_schema()`)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tables {
			var text []byte
			q := `SELECT coalesce(string_agg(t::text, E'\n'), '') FROM ` + pgx.Identifier{tb}.Sanitize() + ` t`
			if err := conn.QueryRow(ctx, q).Scan(&text); err != nil {
				t.Fatal(err)
			}
			out["postgres table "+tb] = text
		}
		return out
	}
	err := filepath.Walk(e.dataDir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// account creates an account with credit (USD decimal text).
func (e *env) account(id, usd string) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.store.CreateAccount(ctx, id); err != nil {
		e.t.Fatal(err)
	}
	if usd != "" && usd != "0" {
		amt, err := pricing.ParseUSD(usd)
		if err != nil {
			e.t.Fatal(err)
		}
		if _, err := e.store.Credit(ctx, id, amt, "test"); err != nil {
			e.t.Fatal(err)
		}
	}
}

// key creates a key on a route ("auto" for Auto) and returns the plaintext.
func (e *env) key(account, route string, exclude ...string) string {
	e.t.Helper()
	plain, id, hash, err := store.NewKey()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.CreateKey(context.Background(), store.Key{ID: id, Hash: hash, Account: account, Route: route, Exclude: exclude, Created: time.Now()}); err != nil {
		e.t.Fatal(err)
	}
	return plain
}

func (e *env) balance(account string) store.Account {
	e.t.Helper()
	e.gw.bill.WaitSettled(context.Background(), account) // as the admin API does
	a, err := e.store.Balance(context.Background(), account)
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

// charges lists the account's journal, after its answered calls have
// settled, as the admin API does.
func (e *env) charges(account string, limit int) ([]store.Entry, error) {
	e.gw.bill.WaitSettled(context.Background(), account)
	return e.store.Charges(context.Background(), account, limit)
}

// do sends a request to the gateway and returns status, headers and body.
func (e *env) do(method, path, key string, body any, hdr ...string) (int, http.Header, []byte) {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	// A cut stream ends in a read error: return what arrived before it.
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data
}

// errBody decodes the error body (docs/api.md#errors), failing the test if the shape is wrong.
func errBody(t testing.TB, data []byte) (msg, typ string, code any) {
	t.Helper()
	var b struct {
		Error *struct {
			Message *string `json:"message"`
			Type    *string `json:"type"`
			Code    any     `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &b); err != nil || b.Error == nil || b.Error.Message == nil || b.Error.Type == nil {
		t.Fatalf("not the error body (docs/api.md#errors): %s", data)
	}
	return *b.Error.Message, *b.Error.Type, b.Error.Code
}

func chatBody(model, content string, extra ...string) string {
	s := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]`, model, content)
	for _, x := range extra {
		s += "," + x
	}
	return s + "}"
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// checkNoneUncharged fails t if gw answered a call whose charge it could not
// write (relay_calls_uncharged_total): no test may leave one, whatever it
// does to the store.
func checkNoneUncharged(t testing.TB, gw *Gateway) {
	t.Helper()
	if n := gw.bill.Uncharged(); n != 0 {
		t.Errorf("%v calls were answered and left uncharged (relay_calls_uncharged_total)", n)
	}
}
