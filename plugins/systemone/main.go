package main

import (
	_ "embed"

	"github.com/modelrelay/modelrelay/sdk"
)

// prices is the default price list; the host's systemone.json replaces it.
//
//go:embed systemone.json
var prices []byte

func init() { sdk.Register(newPlugin(prices).Plugin()) }

func main() {}
