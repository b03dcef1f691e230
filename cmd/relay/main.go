package main

import (
	"fmt"
	"os"
)

const usage = `relay — the ModelRelay gateway

usage:
  relay serve   [-config relay.yaml]               run the gateway
  relay sim     [-addr 127.0.0.1:9090] [faults…]   run the simulated provider
  relay migrate [-config relay.yaml] [-dsn URL]    bring a PostgreSQL store to this build's schema
  relay store   copy -from badger:./data -to postgres://…   copy a Badger ledger into an empty PostgreSQL store and verify it
  relay demo    [-addr 127.0.0.1:8080] [-data ./data] [-plugins ./build/plugins]
  relay keys     create -account A -route R [-exclude m1,m2] [key settings] | list [-account A] | revoke KEY
                 | update KEY [key settings]
                 key settings: -label L -limit-usd 5 -limit-reset daily|weekly|monthly|none
                               -expires 2026-12-31T00:00:00Z|none -allow 10.0.0.0/8 (repeat, or none)
  relay accounts create -account A | credit -account A -usd 1.50 | balance -account A | charges -account A | list
                 | update -account A -alert-below-usd 5
                 | login -account A -email alice@example.com   (a one-time console setup link)
  relay plugin  test PLUGIN.wasm DIR [-update]

The admin commands talk to a running gateway: -server (default
http://127.0.0.1:8080) and the admin token in RELAY_ADMIN_TOKEN. Flags may
come before or after the other arguments.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	args := os.Args[2:]
	switch os.Args[1] {
	case "serve":
		err = runServe(args)
	case "sim":
		err = runSim(args)
	case "migrate":
		err = runMigrate(args)
	case "store":
		err = runStore(args)
	case "demo":
		err = runDemo(args)
	case "keys":
		err = runKeys(args)
	case "accounts":
		err = runAccounts(args)
	case "plugin":
		err = runPlugin(args)
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "relay: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		if ec, ok := err.(exitCode); ok {
			os.Exit(int(ec))
		}
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
}

// exitCode ends the program with a status and no further message.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
