// Package admin is the gateway's admin API (/admin/*: accounts, credits,
// charges, keys, lines, console logins), the views its answers and the
// admin CLI share (AccountView, KeyView, EntryView, LoginView), and the
// console's backend, which makes keys and credits by the same functions
// as the API so that both follow the same rules.
//
// It imports nothing of the gateway but its configuration, its error type
// and the console: what it needs of the running gateway (the key cache,
// the replicas' revocation, the settling of calls, the lines' health, the
// limiter) comes in Deps, which the gateway builds. The gateway mounts its
// routes (API.Routes) through its own handler wrapper.
package admin
