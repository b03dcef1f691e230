package xlate

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"
)

// respHex is 24 random hex digits: an output item's id after its prefix
// (a variable so that tests can make ids that golden files can hold).
var respHex = func() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// respNow is the time a response is created at (a variable for tests).
var respNow = func() int64 { return time.Now().Unix() }

// respAppendRaw appends JSON as written by a caller, compacted onto one
// line; null when there is none (or it is not valid JSON, which the
// parser never lets through).
func respAppendRaw(dst []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(dst, "null"...)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return append(dst, "null"...)
	}
	return append(dst, b.Bytes()...)
}

// respAppendStringOrNull appends s as a JSON string, or null when empty.
func respAppendStringOrNull(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendString(dst, s)
}

// respAppendBool appends true or false.
func respAppendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}
