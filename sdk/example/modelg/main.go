// Command modelg is a complete pricing plugin for one new model.
package main

import "github.com/modelrelay/modelrelay/sdk"

// prices is the plugin's price list (a modelg.json beside modelg.wasm
// replaces it): USD per one million tokens.
const prices = `{"models": [{
  "id": "modelg-1", "description": "Model G 1, a new chat model",
  "endpoints": ["chat_completions"], "context_window": 128000, "max_output": 16384,
  "auto_route": "standard",
  "routes": {"standard": {"unit": "per_million_tokens",
    "input": "0.50", "output": "1.50", "cache_read": "0.05"}}
}]}`

func init() { sdk.Register(sdk.TokenPlugin("modelg", []byte(prices))) }

func main() {}
