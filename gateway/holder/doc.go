// Package holder is what a key holder can read of its key and account:
// GET /v1/key, GET /v1/generations/{id}, and the OpenAI billing shapes
// chat front-ends poll for a balance (/v1/dashboard/billing/subscription
// and /usage). Amounts are exact, never through a float.
//
// It imports nothing of the gateway but its error type: the caller's
// authentication, the key cache and the settling of calls come in Deps and
// in the Auth each request is handed, which the gateway builds.
package holder
