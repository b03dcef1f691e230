// Package sdktest checks a plugin against recorded fixtures (sdk/fixture) in
// one line of a plugin's own test, running its handlers natively through the
// same dispatch (sdk/internal/guest) and binary envelopes as the wasm build:
//
//	func TestFixtures(t *testing.T) { sdktest.Run(t, "../../testdata/plugins/tokens") }
//
// Run configures the plugin with NAME.json from the package directory (the
// test's working directory) when there is one, describes it, and runs every
// fixture of the directory as a subtest named after its file. With
// `go test -args -sdktest.update`, or RELAY_UPDATE=1 in the environment, it
// rewrites each fixture's expectations (and its usage, from the recorded
// upstream body) with what the plugin answers instead of failing.
//
// For a plugin's own tests it also offers: CheckHand (pin fixtures to
// hand-checked holds and charges), CheckEmbedded (the embedded price list is
// NAME.json), CheckReadme with PriceTable (the README's generated price
// table matches the price list; update mode rewrites it), Params and IsError.
//
// What it must not do: touch the network, or print recorded bodies (they can
// hold prompt and completion text); failures name fields and numbers.
package sdktest
