package main

import (
	_ "embed"

	"github.com/modelrelay/modelrelay/sdk"
)

// prices is the default price list; the host's tokens.json replaces it.
//
//go:embed tokens.json
var prices []byte

func init() { sdk.Register(sdk.TokenPlugin("tokens", prices)) }

func main() {}
