package lines

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseCooldown: a cooldowns message from Redis never panics, and what
// it accepts names a line and a time that formats back to the message.
func FuzzParseCooldown(f *testing.F) {
	for _, s := range []string{"std-a 1764092034518", "x 1", "", " 1", "a -5", "a 99999999999999999999", "a b c", "a 1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		name, until, ok := parseCooldown(p)
		if !ok {
			return
		}
		if name == "" || until <= 0 || until%1_000_000 != 0 {
			t.Fatalf("%q → %q %d", p, name, until)
		}
		if back := name + " " + strconv.FormatInt(until/1_000_000, 10); back != p && !strings.HasPrefix(p, name+" ") {
			t.Fatalf("%q → %q", p, back)
		}
	})
}
