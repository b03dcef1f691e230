package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/plugins"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/store"
)

// runDemo starts an in-process simulated provider and the gateway in front
// of it, seeds the demo account on the first run, and prints a key.
func runDemo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "gateway listen address")
	data := fs.String("data", "./data", "data directory (Badger ledger)")
	pluginDir := fs.String("plugins", "./build/plugins", "plugin directory (make plugins builds it)")
	level := fs.String("log-level", "warn", "log level: debug, info, warn, error")
	cache := fs.String("wasm-cache", os.Getenv("RELAY_WASM_CACHE"), "wazero compilation cache (default <data>/wasm-cache)")
	if err := fs.Parse(args); err != nil {
		return exitCode(2)
	}
	log, closeLog, err := newLogger(*level)
	if err != nil {
		return err
	}
	defer closeLog()
	simLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	simSrv := &http.Server{Handler: sim.New(sim.Options{VideoSteps: 2 * time.Second}), ReadHeaderTimeout: 10 * time.Second}
	go simSrv.Serve(simLn)
	defer simSrv.Close()

	cfg := demoConfig("http://"+simLn.Addr().String(), *addr, *data, *pluginDir)
	cfg.Plugins.CacheDir = *cache
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := startServer(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	key, seeded, err := seedDemo(ctx, srv.store)
	if err != nil {
		srv.shutdown(time.Second)
		return err
	}
	stdKey, err := demoKey(ctx, srv.store, "standard")
	if err != nil {
		srv.shutdown(time.Second)
		return err
	}
	fmt.Printf("key: %s\n", key)
	fmt.Printf("standard key: %s\n", stdKey)
	fmt.Println("# the standard key's route answers every text model on every text endpoint (chat, responses, messages), translating where its line speaks another API")
	fmt.Printf("admin token: %s\n", cfg.AdminToken)
	if seeded {
		fmt.Println("# first run: created account demo with $10.00 of credit and an Auto-route key")
	} else {
		fmt.Println("# account demo exists: a new Auto-route key was made for it (earlier keys still work)")
	}
	fmt.Printf("# gateway http://%s — simulated provider http://%s — data %s\n", srv.addr, simLn.Addr(), *data)
	fmt.Println("# try it:")
	fmt.Printf("curl -s http://%s/v1/chat/completions -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{\"model\":\"modelf-flash\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}]}'\n", srv.addr, key)
	fmt.Printf("# balance: RELAY_ADMIN_TOKEN=%s relay accounts balance -account demo -server http://%s\n", cfg.AdminToken, srv.addr)
	if err := printConsole(ctx, srv); err != nil {
		srv.shutdown(time.Second)
		return err
	}
	<-ctx.Done()
	return srv.shutdown(10 * time.Second)
}

// demoConfig is the demo's catalogue of lines: two named routes besides
// Auto. "standard" serves every model, each over lines of its own
// protocol (the OpenAI models over a primary and a fallback), and every
// text model on every text endpoint (serve); "economy" serves the cheaper
// subset the plugins price on it.
func demoConfig(simURL, addr, data, pluginDir string) config.Config {
	tok := make([]byte, 24)
	_, _ = rand.Read(tok)
	cfg := config.Config{
		Listen:       addr,
		LocalConfig:  store.LocalConfig{DataDir: data},
		SupportEmail: "support@modelrelay.local",
		AdminToken:   "adm_" + hex.EncodeToString(tok),
		Plugins:      plugins.Settings{Dir: pluginDir},
		Routes:       []config.RouteConfig{{Name: "standard"}, {Name: "economy"}},
		Lines: []config.LineConfig{
			{Name: "standard-primary", Protocol: config.ProtocolOpenAI, BaseURL: simURL, Models: demoOpenAIModels, Route: "standard", Priority: 0},
			{Name: "standard-fallback", Protocol: config.ProtocolOpenAI, BaseURL: simURL, Models: demoOpenAIModels, Route: "standard", Priority: 1},
			{Name: "standard-messages", Protocol: config.ProtocolAnthropic, BaseURL: simURL, Models: []string{"modela-fable-5-1", "modela-sonnet-5-5", "modela-opus-5-5"}, Route: "standard"},
			{Name: "standard-chat", Protocol: config.ProtocolOpenAIChat, BaseURL: simURL, Models: []string{"modeld-5.3-Abliterated", "modele-k3"}, Route: "standard"},
			{Name: "standard-gemini", Protocol: config.ProtocolGemini, BaseURL: simURL, Models: []string{"modelf-flash", "modelf-v4-pro"}, Route: "standard"},
			{Name: "economy-a", Protocol: config.ProtocolOpenAI, BaseURL: simURL, Models: []string{"*"}, Route: "economy", Weight: 3},
			{Name: "economy-b", Protocol: config.ProtocolOpenAI, BaseURL: simURL, Models: []string{"*"}, Route: "economy", Weight: 1},
		},
		// On standard, every text model answers on every text endpoint:
		// a call its line does not speak is translated.
		Serve: []config.ServeConfig{{Models: []string{"*"}, Route: "standard", Endpoints: config.TextEndpoints}},
	}
	f := false
	cfg.SyncWrites = &f
	return cfg
}

// demoOpenAIModels are the models the demo's standard openai lines serve:
// those the simulated provider serves on every OpenAI endpoint (responses
// models, images, video, typed questions). The other text models have a
// line of their own protocol: messages (modela), chat only (modeld,
// modele) and Gemini (modelf).
var demoOpenAIModels = []string{
	"modelb-6-astra", "modelb-6.1-sol", "modelc-4.7",
	"modelb-image-2.5-sunburst", "modelb-image-2.5-flare", "modelc-imagine-video-1.5",
	"sysmodel-1.13.0", "sysmodel-latest", "sysmodel-preview",
}

// demoLogin is the console login the demo gives the demo account.
const demoLogin = "demo@example.com"

// demoCredit is what the demo account is credited with on the first run.
const demoCredit = 10 * pricing.NanoPerUSD

// printConsole issues the demo account's console login (a fresh one-time
// link on every run) and prints it with the operator's sign-in address.
func printConsole(ctx context.Context, srv *server) error {
	base := "http://" + srv.addr
	if srv.consoleAddr != "" {
		base = "http://" + srv.consoleAddr
	}
	token, hash, err := store.NewSetupToken()
	if err != nil {
		return err
	}
	now := time.Now()
	if _, err := srv.store.IssueLogin(ctx, demoLogin, "demo", hash, now.Add(24*time.Hour), now); err != nil {
		return fmt.Errorf("demo console login: %w", err)
	}
	fmt.Println("# web console:")
	fmt.Printf("#   account demo (%s): set a password once at %s/console/setup/%s\n", demoLogin, base, token)
	fmt.Printf("#   operator: sign in at %s/console/signin with the admin token printed above\n", base)
	return nil
}

func seedDemo(ctx context.Context, st store.Store) (key string, seeded bool, err error) {
	_, err = st.Balance(ctx, "demo")
	switch {
	case errors.Is(err, store.ErrNotFound):
		if _, err := st.CreateAccount(ctx, "demo"); err != nil {
			return "", false, err
		}
		if _, err := st.Credit(ctx, "demo", demoCredit, "demo credit"); err != nil {
			return "", false, err
		}
		seeded = true
	case err != nil:
		return "", false, err
	}
	plain, err := demoKey(ctx, st, store.AutoRoute)
	return plain, seeded, err
}

// demoKey makes a new key of the demo account on route.
func demoKey(ctx context.Context, st store.Store, route string) (string, error) {
	plain, id, hash, err := store.NewKey()
	if err != nil {
		return "", err
	}
	if err := st.CreateKey(ctx, store.Key{ID: id, Hash: hash, Account: "demo", Route: route, Created: time.Now()}); err != nil {
		return "", err
	}
	return plain, nil
}
