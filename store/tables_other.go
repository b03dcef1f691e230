//go:build !linux

package store

import "errors"

// errPageOutUnsupported: only Linux pages out the ledger's tables
// (tables_linux.go).
var errPageOutUnsupported = errors.New("store: paging out the ledger's tables needs Linux")

func pageOutTables(string) (int64, error) { return 0, errPageOutUnsupported }
