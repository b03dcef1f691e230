//go:build !linux

package main

// presizeFDTable does nothing outside Linux (see fdtable_linux.go).
func presizeFDTable(want int) (int, error) { return 0, nil }
