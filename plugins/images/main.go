package main

import (
	_ "embed"

	"github.com/modelrelay/modelrelay/sdk"
)

// prices is the default price list; the host's images.json replaces it.
//
//go:embed images.json
var prices []byte

func init() { sdk.Register(newPlugin(prices).Plugin()) }

func main() {}
