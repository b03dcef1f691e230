package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

// target is one system the benchmark loads.
type target struct {
	Name string // direct, proxy, control (optional), gateway, gateway-x, gateway-pg (optional)
	URL  string // base URL; the chat path is appended
	Key  string // sent as "Authorization: Bearer" (the sim and the proxy ignore it)
	// Keys, when more than one, are taken in turn instead of Key (keys of
	// as many accounts: the calls spread over them); turn counts the calls.
	Keys []string
	turn *atomic.Uint64
	PID  int // process to read memory of; 0 = none
}

// withKeys is t with the comma-separated keys: the first as Key, all in
// turn when there is more than one.
func (t target) withKeys(keys string) target {
	k := strings.Split(keys, ",")
	t.Key = k[0]
	if len(k) > 1 {
		t.Keys, t.turn = k, new(atomic.Uint64)
	}
	return t
}

// key is the key of t's next call.
func (t target) key() string {
	if len(t.Keys) < 2 {
		return t.Key
	}
	return t.Keys[(t.turn.Add(1)-1)%uint64(len(t.Keys))]
}

// Settings are the benchmark's knobs, recorded in the results.
type Settings struct {
	Model          string        `json:"model"`
	Rates          []int         `json:"rates"`
	Duration       time.Duration `json:"duration"`
	Warmup         time.Duration `json:"warmup"`
	Rounds         int           `json:"rounds"`
	Pause          time.Duration `json:"pause"`
	MaxWorkers     uint64        `json:"max_workers"`
	Timeout        time.Duration `json:"timeout"`
	TPDuration     time.Duration `json:"throughput_duration"`
	Conns          int           `json:"conns"`
	StreamRate     int           `json:"stream_rate"`
	StreamDuration time.Duration `json:"stream_duration"`
	Chunks         int           `json:"chunks"`
	ChunkGap       time.Duration `json:"chunk_gap"`
	OpenStreams    int           `json:"open_streams"`
	OpenRate       int           `json:"open_rate"`
	OpenTimeout    time.Duration `json:"open_timeout"`
	SimLatency     string        `json:"sim_latency"`
	Jitter         time.Duration `json:"jitter"`
	Phases         []string      `json:"phases"`
	SUTCPU         int           `json:"sut_cpu"`  // -1: steal not measured
	LoadCPU        int           `json:"load_cpu"` // -1: not watched for stalls
	// PGDB is the database gateway-pg keeps its ledger in ("": no
	// gateway-pg); PGSync its synchronous_commit, as the server reported it.
	PGDB   string `json:"pg_db,omitempty"`
	PGSync string `json:"pg_synchronous_commit,omitempty"`
	// Accounts is how many accounts each gateway's calls spread over (one
	// key each, in turn).
	Accounts int `json:"accounts"`
	// The age phase (age.go): calls each gateway serves before the other
	// phases, then a step of StepDuration at StepFactor × its fresh
	// throughput.
	AgeCalls     uint64        `json:"age_calls"`
	StepFactor   float64       `json:"step_factor"`
	StepDuration time.Duration `json:"step_duration"`
}

// gatewayPG is the target of the gateway whose ledger is in PostgreSQL,
// measured beside the Badger one ("gateway").
const gatewayPG = "gateway-pg"

// gatewayX is the target of the gateway whose line speaks Gemini: every
// chat call translated there and back, measured beside the pass-through
// one ("gateway").
const gatewayX = "gateway-x"

// isGateway reports whether a target is a relay serve (it serves /metrics).
func isGateway(name string) bool { return name == "gateway" || name == gatewayX || name == gatewayPG }

// stallCPUs are the CPUs whose stalls the latency phase watches for.
func (s Settings) stallCPUs() []int {
	var cpus []int
	for _, c := range []int{s.SUTCPU, s.LoadCPU} {
		if c >= 0 && !slices.Contains(cpus, c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

var allPhases = []string{"age", "latency", "throughput", "serial", "stream", "rss"}

// options are loadgen's command line: the settings, the targets and
// where the results go.
type options struct {
	s                                    Settings
	direct, proxy, gateway, control, key string
	gatewayPG, keyPG, holdProxy, holdKey string
	gatewayX, keyX                       string
	gatewayPID, gatewayPGPID, proxyPID   int
	gatewayXPID                          int
	controlPID, simPID, holdProxyPID     int
	profileURL, profileDir, callsDir     string
	microPath, jsonOut, mdOut            string
}

func run(args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	targets, hold, err := o.targets()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res := &Results{Settings: o.s, Started: time.Now().UTC()}
	b := &bench{s: o.s, log: os.Stderr, callsDir: o.callsDir, simPID: o.simPID}
	if b.callsDir != "" {
		if err := os.MkdirAll(b.callsDir, 0o755); err != nil {
			return err
		}
	}
	if o.profileURL != "" {
		if b.prof, err = newProfiler(o.profileURL, o.profileDir, b.logf); err != nil {
			return err
		}
	}
	if err := b.runAll(ctx, targets, hold, res); err != nil {
		return err
	}
	return o.write(res)
}

// parseFlags reads the command line and checks the settings.
func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	o := &options{}
	o.targetFlags(fs)
	o.s.flags(fs)
	rates := fs.String("rates", "500,1000,2000,4000", "latency: fixed rates, requests/s")
	phases := fs.String("phases", strings.Join(allPhases, ","), "phases to run")
	fs.StringVar(&o.profileURL, "profile", "", "base URL of the gateway's net/http/pprof (its debug_listen): save CPU and heap profiles")
	fs.StringVar(&o.profileDir, "profile-dir", "build/bench-prof", "where -profile saves them")
	fs.StringVar(&o.callsDir, "calls-dir", "", "latency: write every answered call of each measurement (start in Unix ns, latency in ns) to a CSV file here, for analysis beside other traces (optional)")
	fs.StringVar(&o.microPath, "micro", "", "go test -bench output to check the plugin time in (optional)")
	fs.StringVar(&o.jsonOut, "json", "", "write the results as JSON here (optional)")
	fs.StringVar(&o.mdOut, "md", "", "write the markdown report here (default: stdout)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if o.s.Rates, err = parseRates(*rates); err != nil {
		return nil, err
	}
	if o.s.Phases, err = parsePhases(*phases); err != nil {
		return nil, err
	}
	if err := o.s.validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// targetFlags defines the flags that say where the targets are.
func (o *options) targetFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.direct, "direct", "", "base URL of the simulated provider (required)")
	fs.StringVar(&o.proxy, "proxy", "", "base URL of the bare proxy in front of it (required)")
	fs.StringVar(&o.gateway, "gateway", "", "base URL of the gateway in front of it (required)")
	fs.StringVar(&o.control, "control", "", "base URL of a second bare proxy like -proxy: the A/A control, measured like the others (optional)")
	fs.StringVar(&o.key, "key", "", "gateway key whose route reaches -direct (required); several, comma-separated, of as many accounts, are taken in turn")
	fs.StringVar(&o.gatewayPG, "gateway-pg", "", "base URL of a second gateway in front of -direct, its ledger in PostgreSQL: measured beside -gateway (optional)")
	fs.StringVar(&o.keyPG, "key-pg", "", "gateway-pg's key whose route reaches -direct (with -gateway-pg); several as with -key")
	fs.IntVar(&o.gatewayPGPID, "gateway-pg-pid", 0, "gateway-pg process id (memory; CPU per call with -sim-pid)")
	fs.StringVar(&o.s.PGDB, "pg-db", "", "gateway-pg's database: CPU per call also counts its server processes (backends titled with this name) (with -gateway-pg)")
	fs.StringVar(&o.s.PGSync, "pg-sync", "", "gateway-pg's synchronous_commit, for the report (with -gateway-pg)")
	fs.StringVar(&o.gatewayX, "gateway-x", "", "base URL of a gateway in front of -direct whose line speaks Gemini (every chat call translated there and back): measured beside -gateway (optional)")
	fs.StringVar(&o.keyX, "key-x", "", "gateway-x's key whose route reaches -direct (with -gateway-x); several as with -key")
	fs.IntVar(&o.gatewayXPID, "gateway-x-pid", 0, "gateway-x process id (memory; CPU per call with -sim-pid)")
	fs.StringVar(&o.holdProxy, "hold-proxy", "", "rss: base URL of a bare proxy in front of a provider with a long chunk gap")
	fs.StringVar(&o.holdKey, "hold-key", "", "rss: gateway key whose route reaches that provider")
	fs.IntVar(&o.gatewayPID, "gateway-pid", 0, "gateway process id (memory; CPU per call with -sim-pid)")
	fs.IntVar(&o.proxyPID, "proxy-pid", 0, "pid of the -proxy process (memory; CPU per call with -sim-pid)")
	fs.IntVar(&o.controlPID, "control-pid", 0, "pid of the -control process (memory; CPU per call with -sim-pid)")
	fs.IntVar(&o.simPID, "sim-pid", 0, "pid of the -direct provider: latency then reports the CPU time per call of it and of each hop with a pid (optional)")
	fs.IntVar(&o.holdProxyPID, "hold-proxy-pid", 0, "pid of the -hold-proxy process (memory)")
}

// flags defines the flags of the benchmark's knobs.
func (s *Settings) flags(fs *flag.FlagSet) {
	fs.StringVar(&s.Model, "model", "modelf-flash", "model of every call")
	fs.DurationVar(&s.Duration, "duration", 5*time.Second, "latency: measured time per rate and target")
	fs.DurationVar(&s.Warmup, "warmup", time.Second, "warm-up before every measurement (discarded)")
	fs.IntVar(&s.Rounds, "rounds", 3, "rounds of every phase but rss; the report shows medians")
	fs.DurationVar(&s.Pause, "pause", 500*time.Millisecond, "idle time between two measurements")
	fs.Uint64Var(&s.MaxWorkers, "max-workers", 2048, "latency: most concurrent requests vegeta may open to hold a rate")
	fs.DurationVar(&s.Timeout, "timeout", 10*time.Second, "timeout of one request")
	fs.DurationVar(&s.TPDuration, "tp-duration", 10*time.Second, "throughput: measured time per target")
	fs.IntVar(&s.Conns, "conns", 64, "throughput: workers and connections")
	fs.IntVar(&s.StreamRate, "stream-rate", 50, "stream: streams started per second")
	fs.DurationVar(&s.StreamDuration, "stream-duration", 10*time.Second, "stream: measured time per target")
	fs.IntVar(&s.Chunks, "chunks", 20, "stream: content chunks the provider sends (for the report)")
	fs.DurationVar(&s.ChunkGap, "chunk-gap", 10*time.Millisecond, "stream: the provider's gap between chunks (for the report)")
	fs.IntVar(&s.OpenStreams, "open-streams", 1000, "rss: concurrent streams held open")
	fs.IntVar(&s.OpenRate, "open-rate", 500, "rss: streams opened per second")
	fs.DurationVar(&s.OpenTimeout, "open-timeout", 60*time.Second, "rss: most time to get every stream open")
	fs.StringVar(&s.SimLatency, "sim-latency", "0s", "the provider's -latency (for the report)")
	fs.IntVar(&s.SUTCPU, "sut-cpu", -1, "CPU the systems under test are pinned to: record the time the hypervisor steals from it during each measurement (-1 = do not)")
	fs.IntVar(&s.LoadCPU, "load-cpu", -1, "CPU loadgen is pinned to: latency also reports the calls clear of any stall of it or of -sut-cpu (-1 = only -sut-cpu)")
	fs.DurationVar(&s.Jitter, "jitter", 3*time.Second, "measure the timer wake-up jitter of loadgen's CPU this long first (0 = skip)")
	fs.Uint64Var(&s.AgeCalls, "age-calls", 1_000_000, "age: calls each gateway serves, as fast as -conns go, before the other phases")
	fs.Float64Var(&s.StepFactor, "step-factor", 1.5, "age: the step past capacity offers this many times the gateway's fresh throughput")
	fs.DurationVar(&s.StepDuration, "step-duration", 10*time.Second, "age: how long the step past capacity lasts")
}

// targets are the systems the latency, throughput and stream phases load,
// and hold those the rss phase holds streams open on; it sets
// o.s.Accounts from -key.
func (o *options) targets() (targets, hold []target, err error) {
	for name, v := range map[string]string{"-direct": o.direct, "-proxy": o.proxy, "-gateway": o.gateway, "-key": o.key} {
		if v == "" {
			return nil, nil, fmt.Errorf("%s is required", name)
		}
	}
	o.s.Accounts = len(strings.Split(o.key, ","))
	targets = []target{
		target{Name: "direct", URL: o.direct}.withKeys(o.key),
		target{Name: "proxy", URL: o.proxy, PID: o.proxyPID}.withKeys(o.key),
		target{Name: "gateway", URL: o.gateway, PID: o.gatewayPID}.withKeys(o.key),
	}
	if o.control != "" {
		targets = slices.Insert(targets, 2, target{Name: "control", URL: o.control, PID: o.controlPID}.withKeys(o.key))
	}
	if o.gatewayX != "" {
		t, err := o.second("-gateway-x", "-key-x", target{Name: gatewayX, URL: o.gatewayX, PID: o.gatewayXPID}, o.keyX)
		if err != nil {
			return nil, nil, err
		}
		targets = append(targets, t)
	} else if o.keyX != "" || o.gatewayXPID != 0 {
		return nil, nil, errors.New("-key-x and -gateway-x-pid need -gateway-x")
	}
	if o.gatewayPG != "" {
		t, err := o.second("-gateway-pg", "-key-pg", target{Name: gatewayPG, URL: o.gatewayPG, PID: o.gatewayPGPID}, o.keyPG)
		if err != nil {
			return nil, nil, err
		}
		targets = append(targets, t)
	} else if o.s.PGDB != "" || o.s.PGSync != "" || o.keyPG != "" {
		return nil, nil, errors.New("-pg-db, -pg-sync and -key-pg need -gateway-pg")
	}
	if o.s.has("rss") {
		if o.holdProxy == "" || o.holdKey == "" || o.holdProxyPID == 0 || o.gatewayPID == 0 {
			return nil, nil, errors.New("rss: -hold-proxy, -hold-key, -hold-proxy-pid and -gateway-pid are required")
		}
		hold = []target{
			{Name: "proxy", URL: o.holdProxy, Key: o.holdKey, PID: o.holdProxyPID},
			{Name: "gateway", URL: o.gateway, Key: o.holdKey, PID: o.gatewayPID},
		}
	}
	return targets, hold, nil
}

// second is t, a gateway beside -gateway (flag), with its keys (keyFlag):
// as many as -key has, so that both spread their calls over as many
// accounts.
func (o *options) second(flag, keyFlag string, t target, keys string) (target, error) {
	if keys == "" {
		return t, fmt.Errorf("%s needs %s", flag, keyFlag)
	}
	if n := len(strings.Split(keys, ",")); n != o.s.Accounts {
		return t, fmt.Errorf("%s has %d keys and -key %d: both gateways spread their calls over as many accounts", keyFlag, n, o.s.Accounts)
	}
	return t.withKeys(keys), nil
}

// write adds the micro-benchmarks' summary to res, when -micro names their
// output, and writes res as JSON (-json) and as the markdown report (-md,
// else stdout).
func (o *options) write(res *Results) error {
	if o.microPath != "" {
		f, err := os.Open(o.microPath)
		if err != nil {
			return err
		}
		samples, err := parseMicro(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", o.microPath, err)
		}
		res.Micro = microSummary(samples)
	}
	if o.jsonOut != "" {
		data, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonOut, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	md := renderReport(res)
	if o.mdOut == "" {
		_, err := os.Stdout.WriteString(md)
		return err
	}
	return os.WriteFile(o.mdOut, []byte(md), 0o644)
}

func (s Settings) has(phase string) bool { return slices.Contains(s.Phases, phase) }

func (s Settings) validate() error {
	switch {
	case s.Model == "":
		return errors.New("-model is required")
	case s.Duration <= 0 || s.TPDuration <= 0 || s.StreamDuration <= 0:
		return errors.New("-duration, -tp-duration and -stream-duration must be positive")
	case s.Warmup < 0 || s.Pause < 0 || s.Jitter < 0:
		return errors.New("-warmup, -pause and -jitter must not be negative")
	case s.Rounds < 1 || s.Rounds > 20:
		return errors.New("-rounds must be within 1..20")
	case s.MaxWorkers < 1:
		return errors.New("-max-workers must be at least 1")
	case s.Timeout <= 0:
		return errors.New("-timeout must be positive")
	case s.Conns < 1 || s.Conns > 4096:
		return errors.New("-conns must be within 1..4096")
	case s.StreamRate < 1 || s.StreamRate > 10000:
		return errors.New("-stream-rate must be within 1..10000")
	case s.OpenStreams < 1 || s.OpenStreams > 10000:
		return errors.New("-open-streams must be within 1..10000")
	case s.OpenRate < 1:
		return errors.New("-open-rate must be positive")
	case s.OpenTimeout <= 0:
		return errors.New("-open-timeout must be positive")
	case s.SUTCPU < -1 || s.SUTCPU > 4095:
		return errors.New("-sut-cpu must be a CPU number, or -1")
	case s.LoadCPU < -1 || s.LoadCPU > 4095:
		return errors.New("-load-cpu must be a CPU number, or -1")
	case s.StepFactor <= 1 || s.StepFactor > 100:
		return errors.New("-step-factor must be above 1 (past capacity) and at most 100")
	case s.StepDuration <= 0:
		return errors.New("-step-duration must be positive")
	}
	return nil
}

// parseRates reads "500,1000": positive rates in requests/s, no repeats.
func parseRates(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 1_000_000 {
			return nil, fmt.Errorf("-rates: %q is not a rate within 1..1000000", f)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("-rates: %d is listed twice", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// parsePhases reads "latency,stream", in the order of allPhases.
func parsePhases(v string) ([]string, error) {
	want := map[string]bool{}
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(allPhases, f) {
			return nil, fmt.Errorf("-phases: %q is not one of %s", f, strings.Join(allPhases, ", "))
		}
		want[f] = true
	}
	var out []string
	for _, p := range allPhases {
		if want[p] {
			out = append(out, p)
		}
	}
	return out, nil
}
