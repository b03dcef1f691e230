package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// Placeholders so that the tree builds while issue 30's store work is in
// progress; the postgres helper replaces this file.
var errTodo = errors.New("postgres: not implemented yet")

func (s *Store) UpdateKey(context.Context, string, store.KeyUpdate) (store.Key, error) {
	return store.Key{}, errTodo
}
func (s *Store) Generation(context.Context, string, string) (store.Generation, error) {
	return store.Generation{}, errTodo
}
func (s *Store) Journal(context.Context, string, time.Time, time.Time, func(store.Entry) error) error {
	return errTodo
}
func (s *Store) SetAlert(context.Context, string, pricing.Nano) (store.Account, error) {
	return store.Account{}, errTodo
}
func (s *Store) AccountsBelowAlert(context.Context) (int, error) { return 0, errTodo }
