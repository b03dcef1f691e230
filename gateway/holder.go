package gateway

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/modelrelay/modelrelay/gateway/holder"
	"github.com/modelrelay/modelrelay/store"
)

// holderRoutes mounts what a key holder can read of its key and account
// (package holder) on r through handle. Each read authenticates its caller
// as a relayed call does, recording the key in the access log, and takes a
// token from the key's rate-limit bucket.
func (g *Gateway) holderRoutes(r *httprouter.Router) {
	api := holder.New(holder.Deps{
		Store: g.store, Now: g.now, Settled: g.bill.WaitSettled, Evict: g.keys.evictID,
		Cache:        func(k store.Key) { g.keys.put(k, g.now()) },
		StreamEnding: g.bill.WaitStream,
	})
	api.Routes(r, func(name string, h holder.Handler) httprouter.Handle {
		return g.handle(name, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, info *reqInfo) error {
			return h(w, r, ps, func(r *http.Request) (store.Key, error) {
				k, err := g.authenticate(r.Context(), r, false, info)
				if err != nil {
					return store.Key{}, err
				}
				if err := g.limits.allowKey(r.Context(), k, g.now()); err != nil {
					return store.Key{}, err
				}
				return k, nil
			})
		})
	})
}
