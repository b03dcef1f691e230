// Command relay is ModelRelay's only program: the gateway (relay serve),
// the simulated provider (relay sim), the demo, the PostgreSQL migration
// and the copy of a Badger ledger into PostgreSQL, the admin CLI (relay
// keys, relay accounts) and the offline plugin tester (relay plugin test).
//
// It composes; it does not decide. Each package owns its configuration,
// defaults and validation (gateway, plugins, store, internal/shared); this
// command reads the file, opens the store, starts the plugin host and the
// gateway, and wires the listeners, the log sink and the shutdown.
//
// What it must not do: hold business rules the packages should own, write
// caller content to its logs, or talk to the ledger directly in the admin
// commands (they go through the running gateway's admin API, with the
// admin token from RELAY_ADMIN_TOKEN).
//
// Where to start reading: main.go dispatches the subcommands; serve.go is
// relay serve from configuration to shutdown; store.go opens the store the
// configuration names; admincli.go is the admin CLI. The process-level
// tests live here too: crash recovery, many replicas, slow clients, a sick
// pool, the cluster behind nginx and the real coding CLIs.
package main
