package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/sim"
)

var (
	relayBin  string
	pluginDir string
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(floodChildEnv); spec != "" {
		os.Exit(runFloodChild(spec))
	}
	code := func() int {
		tmp, err := os.MkdirTemp("", "relay-cmd-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(tmp)
		relayBin = filepath.Join(tmp, "relay")
		// Built without -race: these tests drive the binary as a user would
		// (the gateway's races are the in-process tests' job), and wazero
		// compiling five plugins into a cold cache is minutes under -race.
		if out, err := exec.Command("go", "build", "-o", relayBin, ".").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build relay: %v\n%s", err, out)
			return 1
		}
		pluginDir = os.Getenv("RELAY_PLUGIN_DIR")
		if m, _ := filepath.Glob(filepath.Join(pluginDir, "*.wasm")); pluginDir == "" || len(m) == 0 {
			pluginDir = filepath.Join(tmp, "plugins")
			root, _ := filepath.Abs("../..")
			cmd := exec.Command("make", "plugins", "PLUGINDIR="+pluginDir)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "make plugins: %v\n%s", err, out)
				return 1
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

const adminToken = "cmd-test-admin-token-123456"

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// gatewayProc is a `relay serve` child process.
type gatewayProc struct {
	cmd  *exec.Cmd
	addr string
	logs *bytes.Buffer
	mu   *sync.Mutex
}

// wasmCache is the plugin compilation cache a test's relay uses:
// RELAY_WASM_CACHE (make sets it), else one in dir.
func wasmCache(dir string) string {
	if c := os.Getenv("RELAY_WASM_CACHE"); c != "" {
		return c
	}
	return filepath.Join(dir, "wasm-cache")
}

func writeConfig(t *testing.T, dir, addr, simURL string) string {
	t.Helper()
	cache := wasmCache(dir)
	cfg := fmt.Sprintf(`listen: %s
data_dir: %s
support_email: ops@relay.test
admin_token: %s
sync_writes: true
plugins:
  dir: %s
  cache_dir: %s
  poll: -1s
routes:
  - name: standard
  - name: economy
lines:
  - {name: std, protocol: openai, base_url: %s, models: ["*"], route: standard}
  - {name: msg, protocol: anthropic, base_url: %s, models: ["*"], route: standard}
  - {name: eco, protocol: openai, base_url: %s, models: ["*"], route: economy}
`, addr, filepath.Join(dir, "data"), adminToken, pluginDir, cache, simURL, simURL, simURL)
	p := filepath.Join(dir, "relay.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

type syncBuffer struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (s syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func startGateway(t *testing.T, config, addr string) *gatewayProc {
	t.Helper()
	return startGatewayCmd(t, exec.Command(relayBin, "serve", "-config", config), addr)
}

// startGatewayCmd starts the gateway cmd runs (relay serve, or a shell
// that sets limits first), which must serve on addr, and waits until it
// answers /healthz.
func startGatewayCmd(t *testing.T, cmd *exec.Cmd, addr string) *gatewayProc {
	t.Helper()
	g := &gatewayProc{cmd: cmd, addr: addr, logs: &bytes.Buffer{}, mu: &sync.Mutex{}}
	cmd.Stdout = syncBuffer{g.mu, g.logs}
	cmd.Stderr = syncBuffer{g.mu, g.logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	var out string
	waitUntil(t, "gateway started", 120*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			out = g.output()
			return false
		}
		resp.Body.Close()
		return true
	}, &out)
	return g
}

func (g *gatewayProc) output() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.logs.String()
}

// outputHas waits up to 5 s for s to appear in the process's output: the
// log sink writes its lines asynchronously, so a line logged before an
// address answered may land a moment after.
func (g *gatewayProc) outputHas(s string) bool {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if strings.Contains(g.output(), s) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// cli runs the relay binary as a user would.
func cli(t *testing.T, server string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	if server != "" && len(args) >= 2 {
		// Flags go after "keys create" and before positional arguments.
		args = append(append(append([]string{}, args[:2]...), "-server", "http://"+server), args[2:]...)
	}
	cmd := exec.Command(relayBin, args...)
	cmd.Env = append(os.Environ(), "RELAY_ADMIN_TOKEN="+adminToken)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestAdminCLI(t *testing.T) {
	s := httptest.NewServer(sim.New(sim.Options{}))
	defer s.Close()
	dir := t.TempDir()
	addr := freeAddr(t)
	g := startGateway(t, writeConfig(t, dir, addr, s.URL), addr)

	if out, errOut, code := cli(t, addr, "accounts", "create", "-account", "acme"); code != 0 {
		t.Fatalf("create: %s %s", out, errOut)
	}
	out, _, code := cli(t, addr, "accounts", "credit", "-account", "acme", "-usd", "1.50")
	if code != 0 || strings.TrimSpace(out) != "1.500000000" {
		t.Fatalf("credit: %q %d", out, code)
	}
	key, _, code := cli(t, addr, "keys", "create", "-account", "acme", "-route", "economy", "-exclude", "modelf-v4-pro")
	key = strings.TrimSpace(key)
	if code != 0 || !strings.HasPrefix(key, "sk-") || strings.Contains(key, "\n") {
		t.Fatalf("keys create must print the key alone: %q", key)
	}
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(`{"model":"modelf-flash","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("call: %d", resp.StatusCode)
	}
	bal, _, _ := cli(t, addr, "accounts", "balance", "-account", "acme")
	bal = strings.TrimSpace(bal)
	if len(bal) != len("1.500000000") || !strings.HasPrefix(bal, "1.4") {
		t.Fatalf("balance must print nine decimals after a charge: %q", bal)
	}
	charges, _, code := cli(t, addr, "accounts", "charges", "-account", "acme")
	if code != 0 || !strings.Contains(charges, "modelf-flash") || !strings.Contains(charges, "credit") {
		t.Fatalf("charges: %s", charges)
	}
	list, _, _ := cli(t, addr, "keys", "list", "-account", "acme")
	if !strings.Contains(list, "economy") || !strings.Contains(list, "modelf-v4-pro") || strings.Contains(list, key) {
		t.Fatalf("keys list: %s", list)
	}
	// Flags after the key, as people type them.
	if out, errOut, code := cli(t, "", "keys", "revoke", key, "-server", "http://"+addr); code != 0 || !strings.HasPrefix(out, "revoked key_") {
		t.Fatalf("revoke: %q %q", out, errOut)
	}
	accts, _, code := cli(t, addr, "accounts", "list")
	if code != 0 || !strings.Contains(accts, "acme") || !strings.Contains(accts, "BALANCE_USD") {
		t.Fatalf("accounts list: %q", accts)
	}
	// Errors: one clear line and a non-zero exit.
	for _, args := range [][]string{
		{"accounts", "balance", "-account", "nobody"},
		{"keys", "create", "-account", "acme", "-route", "nowhere"},
		{"accounts", "credit", "-account", "acme", "-usd", "1.0000000001"},
	} {
		out, errOut, code := cli(t, addr, args...)
		if code == 0 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || errOut == "" {
			t.Errorf("%v: code %d stdout %q stderr %q", args, code, out, errOut)
		}
	}
	if _, errOut, code := cli(t, freeAddr(t), "accounts", "balance", "-account", "acme"); code == 0 || !strings.Contains(errOut, "cannot reach") {
		t.Errorf("unreachable gateway: %d %q", code, errOut)
	}
	if strings.Contains(g.output(), key) {
		t.Error("the key appears in the gateway's logs")
	}
}

// SIGKILL with calls in flight, restart on the same data dir: the books
// balance and no hold stays open.
func TestCrashRecovery(t *testing.T) {
	slow := sim.New(sim.Options{FirstChunk: time.Minute})
	s := httptest.NewServer(slow)
	defer s.Close()
	defer slow.Close()
	dir := t.TempDir()
	addr := freeAddr(t)
	config := writeConfig(t, dir, addr, s.URL)
	g := startGateway(t, config, addr)
	cli(t, addr, "accounts", "create", "-account", "acme")
	cli(t, addr, "accounts", "credit", "-account", "acme", "-usd", "10")
	key, _, _ := cli(t, addr, "keys", "create", "-account", "acme", "-route", "auto")
	key = strings.TrimSpace(key)

	// One completed call, then eight streams left hanging.
	slow.SetOptions(sim.Options{})
	crashCall(addr, key, false)
	slow.SetOptions(sim.Options{FirstChunk: time.Minute})
	for i := 0; i < 8; i++ {
		go crashCall(addr, key, true)
	}
	var out string
	waitUntil(t, "holds appear", 30*time.Second, func() bool {
		out = g.output()
		_, h := acmeBalance(addr)
		return h != "" && h != "0.000000000" && slow.Requests() >= 9
	}, &out)
	balBefore, heldBefore := acmeBalance(addr)
	if err := g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	g.cmd.Process.Wait()

	g2 := startGateway(t, config, addr)
	bal, h := acmeBalance(addr)
	if h != "0.000000000" {
		t.Fatalf("held after restart %s (before the crash: %s)", h, heldBefore)
	}
	if bal != balBefore {
		t.Errorf("balance changed across the crash: %s → %s (holds are released, never charged)", balBefore, bal)
	}
	charges, _, _ := cli(t, addr, "accounts", "charges", "-account", "acme", "-limit", "100")
	if n := strings.Count(charges, "recovery"); n != 8 {
		t.Errorf("want 8 recovery entries, got %d:\n%s", n, charges)
	}
	if !g2.outputHas("released holds left by a process that ended") {
		t.Errorf("recovery not logged: %s", g2.output())
	}
	// The books: balance == Σ journal amounts.
	if got, sum := nanoOf(t, bal), journalSum(t, addr); got != sum {
		t.Fatalf("balance %s != Σ journal %d", bal, sum)
	}
}

// crashCall makes a chat call (a stream when stream) and reads its answer
// whole, whatever it is.
func crashCall(addr, key string, stream bool) {
	body := fmt.Sprintf(`{"model":"modelf-flash","messages":[{"role":"user","content":"crash"}],"stream":%v}`, stream)
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// acmeBalance reads acme's balance and held amount, both empty when the
// gateway does not answer.
func acmeBalance(addr string) (balance, held string) {
	var a struct {
		Balance string `json:"balance_usd"`
		Held    string `json:"held_usd"`
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/admin/accounts/acme", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", ""
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&a)
	return a.Balance, a.Held
}

// journalSum adds up the amounts of acme's journal, in nano-USD.
func journalSum(t *testing.T, addr string) int64 {
	t.Helper()
	var out struct {
		Data []struct {
			Amount json.Number `json:"amount_usd"`
			Text   string      `json:"amount_text"`
		} `json:"data"`
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/admin/accounts/acme/charges?limit=1000", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	var sum int64
	for _, e := range out.Data {
		sum += nanoOf(t, e.Text)
	}
	return sum
}

func nanoOf(t *testing.T, fixed string) int64 {
	t.Helper()
	neg := strings.HasPrefix(fixed, "-")
	fixed = strings.TrimPrefix(fixed, "-")
	whole, frac, _ := strings.Cut(fixed, ".")
	var n int64
	for _, c := range whole + (frac + "000000000")[:9] {
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n
}

// demo is a running `relay demo` and what it printed: the key, the admin
// token, the curl line to try, the demo account's console setup link and
// the operator's console sign-in address.
type demo struct {
	addr, key, token, curl, setup, signin string
}

// startDemo starts relay demo on a fresh data directory and reads its
// output until all that demo holds is printed; the demo stops when the
// test ends.
func startDemo(t *testing.T) *demo {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	cmd := exec.Command(relayBin, "demo", "-addr", addr, "-data", filepath.Join(dir, "data"), "-plugins", pluginDir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := syncBuffer{&sync.Mutex{}, &bytes.Buffer{}}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	d := &demo{addr: addr}
	timer := time.AfterFunc(120*time.Second, func() { _ = cmd.Process.Kill() })
	d.read(bufio.NewScanner(stdout))
	timer.Stop()
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if !strings.HasPrefix(d.key, "sk-") || d.token == "" || !strings.Contains(d.curl, d.key) || d.setup == "" || d.signin == "" {
		stderr.mu.Lock()
		defer stderr.mu.Unlock()
		t.Fatalf("demo output: key %q token %q curl %q setup %q sign-in %q; stderr %s", d.key, d.token, d.curl, d.setup, d.signin, stderr.b.String())
	}
	return d
}

// read takes what the demo prints from sc until it has it all.
func (d *demo) read(sc *bufio.Scanner) {
	for (d.key == "" || d.token == "" || d.curl == "" || d.setup == "" || d.signin == "") && sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "#   account demo ("+demoLogin+"): set a password once at "):
			d.setup = l[strings.LastIndexByte(l, ' ')+1:]
		case strings.HasPrefix(l, "#   operator: sign in at "):
			d.signin = strings.Fields(l)[5]
		case strings.HasPrefix(l, "key: "):
			d.key = strings.TrimPrefix(l, "key: ")
		case strings.HasPrefix(l, "admin token: "):
			d.token = strings.TrimPrefix(l, "admin token: ")
		case strings.HasPrefix(l, "curl "):
			d.curl = l
		}
	}
}

// relay demo prints the key, the admin token and a curl line that works.
func TestDemo(t *testing.T) {
	d := startDemo(t)
	addr := d.addr
	out, err := exec.Command("sh", "-c", d.curl).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"chat.completion"`) {
		t.Fatalf("the printed curl does not work: %v %s", err, out)
	}
	// The console is on, with a setup link for the demo account's login.
	for _, u := range []string{d.setup, d.signin} {
		if !strings.HasPrefix(u, "http://"+addr+"/console/") {
			t.Fatalf("console link %q", u)
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(page), `id="password"`) {
			t.Fatalf("GET %s: %d %s", u, resp.StatusCode, page)
		}
	}
	var a struct {
		Balance string `json:"balance_usd"`
	}
	adminGetAs(t, addr, d.token, "/admin/accounts/demo", &a)
	if !strings.HasPrefix(a.Balance, "9.99") {
		t.Fatalf("demo balance after one call: %q", a.Balance)
	}
}

// relay plugin test passes on every first-party plugin's fixtures and fails,
// naming the fixture, on a wrong expectation.
func TestPluginTestCommand(t *testing.T) {
	root, _ := filepath.Abs("../..")
	wasms, _ := filepath.Glob(filepath.Join(pluginDir, "*.wasm"))
	if len(wasms) < 5 {
		t.Fatalf("want the five first-party plugins in %s, found %v", pluginDir, wasms)
	}
	for _, w := range wasms {
		name := strings.TrimSuffix(filepath.Base(w), ".wasm")
		out, errOut, code := cli(t, "", "plugin", "test", w, filepath.Join(root, "testdata", "plugins", name))
		if code != 0 || !strings.Contains(out, " passed, 0 failed") {
			t.Errorf("%s: exit %d\n%s%s", name, code, out, errOut)
		}
	}
	// Copy the tokens fixtures and break one expectation.
	dir := t.TempDir()
	src := filepath.Join(root, "testdata", "plugins", "tokens")
	ents, _ := os.ReadDir(src)
	broken := ""
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(src, e.Name()))
		var f map[string]any
		if broken == "" && json.Unmarshal(b, &f) == nil {
			if exp, ok := f["expect"].(map[string]any); ok && exp["charge"] != nil {
				exp["charge"] = exp["charge"].(float64) + 1
				b, _ = json.Marshal(f)
				broken = strings.TrimSuffix(e.Name(), ".json")
			}
		}
		os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
	}
	out, _, code := cli(t, "", "plugin", "test", filepath.Join(pluginDir, "tokens.wasm"), dir)
	if code == 0 || !strings.Contains(out, "FAIL") || !strings.Contains(out, broken) || !strings.Contains(out, " 1 failed") {
		t.Fatalf("a wrong expectation must fail: exit %d\n%s", code, out)
	}
}

// SIGTERM with a stream in flight: the stream finishes, the process exits 0,
// and the call is settled (seen after a restart on the same data dir).
func TestGracefulShutdown(t *testing.T) {
	s := httptest.NewServer(sim.New(sim.Options{Chunks: 6, ChunkGap: 150 * time.Millisecond}))
	defer s.Close()
	dir := t.TempDir()
	addr := freeAddr(t)
	config := writeConfig(t, dir, addr, s.URL)
	g := startGateway(t, config, addr)
	cli(t, addr, "accounts", "create", "-account", "acme")
	cli(t, addr, "accounts", "credit", "-account", "acme", "-usd", "1")
	key, _, _ := cli(t, addr, "keys", "create", "-account", "acme", "-route", "economy")
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"modelf-flash","messages":[{"role":"user","content":"drain"}],"stream":true}`))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(key))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil { // the stream has started
		t.Fatal(err)
	}
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(rd)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(rest), "data: [DONE]") {
		t.Fatalf("the stream in flight did not finish: %v\n%s", err, rest)
	}
	done := make(chan error, 1)
	go func() { done <- g.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("relay serve exited with %v:\n%s", err, g.output())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("relay serve did not exit after SIGTERM")
	}
	startGateway(t, config, addr)
	charges, _, _ := cli(t, addr, "accounts", "charges", "-account", "acme")
	if strings.Count(charges, "charge ") != 1 || strings.Contains(charges, "recovery") {
		t.Fatalf("the drained stream must be settled once, not recovered:\n%s", charges)
	}
}

// console.listen serves the console on its own address: there it answers,
// on the gateway's listener /console/ is 404, and the API stays where it was.
func TestConsoleListen(t *testing.T) {
	s := httptest.NewServer(sim.New(sim.Options{}))
	defer s.Close()
	dir := t.TempDir()
	addr, consoleAddr := freeAddr(t), freeAddr(t)
	config := writeConfig(t, dir, addr, s.URL)
	f, err := os.OpenFile(config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "console:\n  listen: %s\n  public_url: https://relay.example.com\n", consoleAddr)
	f.Close()
	g := startGateway(t, config, addr)
	status := func(u string) int {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := status("http://" + consoleAddr + "/console/signin"); st != 200 {
		t.Errorf("console on its listener: %d", st)
	}
	if st := status("http://" + addr + "/console/signin"); st != 404 {
		t.Errorf("console on the gateway's listener: %d", st)
	}
	// The console's listener serves nothing else: other paths go to the console.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get("http://" + consoleAddr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/" {
		t.Errorf("/v1/models on the console's listener: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if !g.outputHas("console listening on http://" + consoleAddr + "/console/") {
		t.Errorf("no console address in the output: %s", g.output())
	}
	cli(t, addr, "accounts", "create", "-account", "acme")
	out, _, code := cli(t, addr, "accounts", "login", "-account", "acme", "-email", "alice@example.com")
	if code != 0 || !strings.Contains(out, "https://relay.example.com/console/setup/rls-") {
		t.Errorf("a login's link is not under console.public_url: %d %s", code, out)
	}
}
