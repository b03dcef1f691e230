package main

import (
	"context"
	"errors"
	"flag"
	"os"

	"github.com/modelrelay/modelrelay/plugins"
)

// runPlugin: relay plugin test PLUGIN.wasm DIR [-update].
func runPlugin(args []string) error {
	if len(args) == 0 || args[0] != "test" {
		return errors.New("usage: relay plugin test PLUGIN.wasm DIR [-update]")
	}
	fs := flag.NewFlagSet("plugin test", flag.ContinueOnError)
	update := fs.Bool("update", false, "rewrite the fixtures' expectations with what the plugin returns")
	// Flags may come before or after the two paths.
	var pos []string
	rest := args[1:]
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			return exitCode(2)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(pos) != 2 {
		return errors.New("usage: relay plugin test PLUGIN.wasm DIR [-update]")
	}
	_, failed, err := plugins.TestFixtures(context.Background(), pos[0], pos[1], *update, os.Stdout)
	if err != nil {
		return err
	}
	if failed > 0 {
		return exitCode(1)
	}
	return nil
}
