package postgres

import (
	"context"
	"testing"

	"github.com/modelrelay/modelrelay/store/storetest"
)

// TestConformance runs the store contract's kit against PostgreSQL, each
// subtest on a fresh schema. The concurrency subtests race three replicas
// (Peers: more stores on the same schema). Crash stops the replica without settling, lets
// its holds' leases run out (moved into the past, as a dead owner's would
// be), and sweeps them from a second replica on the same books.
func TestConformance(t *testing.T) {
	needDB(t)
	storetest.Run(t, func(t *testing.T) storetest.Store {
		s, err := Open(context.Background(), freshDSN(t), Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	}, storetest.Options{
		Claims: []storetest.Capability{storetest.Allotter, storetest.Exporter},
		Peers: func(t *testing.T, ss storetest.Store, n int) []storetest.Store {
			var peers []storetest.Store
			for range n {
				p, err := Open(context.Background(), ss.(*Store).dsn, Options{MaxConns: 4})
				if err != nil {
					t.Fatalf("Open a peer: %v", err)
				}
				peers = append(peers, p)
			}
			return peers
		},
		Crash: func(t *testing.T, ss storetest.Store) storetest.Store {
			s := ss.(*Store)
			dsn := s.dsn
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			exec(t, dsn, `UPDATE holds SET lease_until = now() - interval '1 second'`)
			after, err := Open(context.Background(), dsn, Options{})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if _, err := after.RecoverHolds(context.Background()); err != nil {
				t.Fatalf("RecoverHolds: %v", err)
			}
			return after
		},
	})
}
