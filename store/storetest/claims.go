package storetest

import (
	"slices"
	"testing"

	"github.com/modelrelay/modelrelay/store"
)

// Capability names an optional interface of package store: one that a
// store may implement and that its callers find by type assertion (the
// gateway's allotments, relay store copy's exports). A store claims each
// one it implements in Options.Claims, so that an implementation lost to a
// method whose signature drifted, which a type assertion passes over in
// silence, fails the kit instead of skipping its tests.
type Capability string

// The optional interfaces of package store.
const (
	Allotter Capability = "store.Allotter" // allotments: holds shared by replicas (PostgreSQL)
	Exporter Capability = "store.Exporter" // all of the books, read out for relay store copy
)

// capability is an optional interface with the type assertion that finds
// it.
type capability struct {
	c   Capability
	has func(s Store) bool
}

// optionals are the optional interfaces of package store.
var optionals = []capability{
	{Allotter, is[store.Allotter]},
	{Exporter, is[store.Exporter]},
}

func is[T any](s Store) bool {
	_, ok := s.(T)
	return ok
}

// capabilities: the store is every optional interface it claims, and
// claims every one it is; a claim of something the kit does not know is a
// mistake too.
func (k *kit) capabilities(t *testing.T, s Store) {
	for _, c := range k.opts.Claims {
		if !slices.ContainsFunc(optionals, func(o capability) bool { return o.c == c }) {
			t.Errorf("Options.Claims has %q, which is no optional interface of package store", c)
		}
	}
	for _, o := range optionals {
		switch claims := slices.Contains(k.opts.Claims, o.c); {
		case claims && !o.has(s):
			t.Errorf("the store claims %s and is not one: a method is missing or its signature differs", o.c)
		case !claims && o.has(s):
			t.Errorf("the store is a %s and does not claim it: add it to Options.Claims, so that losing it fails", o.c)
		}
	}
}

// claimed returns s as T, the optional interface c, for the subtest that
// checks c: it skips the subtest when the store does not claim c, and
// fails it when the store claims c and is not one.
func claimed[T any](t *testing.T, k *kit, s Store, c Capability) T {
	t.Helper()
	if !slices.Contains(k.opts.Claims, c) {
		t.Skipf("the store does not claim %s", c)
	}
	v, ok := s.(T)
	if !ok {
		t.Fatalf("the store claims %s and is not one: a method is missing or its signature differs", c)
	}
	return v
}
