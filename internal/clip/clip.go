// Package clip bounds text that may carry a caller's words before it goes
// into an error message or a log line: cut on a rune boundary, its length
// noted, invalid UTF-8 replaced. It is shared by the gateway and the plugin
// host (a plugin's error may quote the caller's values). It does not quote:
// see the gateway's quoted for a caller's value shown as such.
package clip

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// At returns n, or fewer when s[:n] would end inside a rune (at most
// utf8.UTFMax-1 fewer: bytes of invalid UTF-8 are cut anywhere). n must be
// less than len(s).
func At(s string, n int) int {
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(s[n]); i++ {
		n--
	}
	return n
}

// Text returns s cut to n bytes on a rune boundary, followed by …(N bytes)
// with its full length when it was cut, and with invalid UTF-8 replaced.
func Text(s string, n int) string {
	if len(s) > n {
		s = s[:At(s, n)] + "…(" + strconv.Itoa(len(s)) + " bytes)"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
