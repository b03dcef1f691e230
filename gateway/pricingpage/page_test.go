package pricingpage

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func TestPageIsSelfContained(t *testing.T) {
	t.Parallel()
	p := Page()
	if !bytes.HasPrefix(p, []byte("<!doctype html>")) {
		t.Fatal("the page does not start with <!doctype html>")
	}
	// Nothing may come from another origin: no absolute URLs in src/href
	// attributes, no @import or url() in the style sheet, no fetch of
	// another origin.
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)\s(src|href)\s*=\s*["']?\s*(https?:)?//`),
		regexp.MustCompile(`(?i)@import`),
		regexp.MustCompile(`(?i)url\(`),
		regexp.MustCompile(`(?i)fetch\(\s*["'](https?:)?//`),
		regexp.MustCompile(`(?i)<script\s[^>]*src`),
		regexp.MustCompile(`(?i)innerHTML|outerHTML|insertAdjacentHTML|document\.write`),
	} {
		if loc := re.FindIndex(p); loc != nil {
			t.Errorf("the page matches %s at byte %d: %q", re, loc[0], p[loc[0]:min(loc[1]+40, len(p))])
		}
	}
	// No inline event handler attributes (the CSP would block them): look in
	// the markup only, outside the script and the style sheet.
	markup := regexp.MustCompile(`(?is)<(script|style)>.*?</(script|style)>`).ReplaceAll(p, nil)
	if loc := regexp.MustCompile(`(?i)<[a-z][^>]*\son[a-z]+\s*=`).FindIndex(markup); loc != nil {
		t.Errorf("the markup has an inline event handler: %q", markup[loc[0]:loc[1]])
	}
	if bytes.Count(p, []byte("<script>")) != 1 || bytes.Count(p, []byte("<style>")) != 1 {
		t.Error("the page must have exactly one inline <script> and one <style>")
	}
	// A <link> may only carry a data: URL (the empty favicon, so that the
	// browser does not ask for /favicon.ico).
	for _, tag := range regexp.MustCompile(`(?i)<link\s[^>]*>`).FindAll(p, -1) {
		if !regexp.MustCompile(`\shref="data:`).Match(tag) {
			t.Errorf("the page links to another resource: %s", tag)
		}
	}
	if !bytes.Contains(p, []byte(`fetch("api/pricing"`)) {
		t.Error("the page does not fetch the price table by a relative URL")
	}
}

func TestContentSecurityPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, html, want string
	}{
		{"none", "<p>x</p>", "default-src 'none'; script-src 'none'; style-src 'none'; "},
		{
			"one of each",
			"<style>a{}</style><script>1</script>",
			// printf 'a{}' | openssl dgst -sha256 -binary | base64, and '1'
			"default-src 'none'; script-src 'sha256-a4ayc/80/OGda4BO/1o/V0etpOqiLx1JwB5S3beHW0s='; style-src 'sha256-X1RutGBrXCt9KkSaXMK7tHftWiRscFHOhxsS8tv8hBk='; ",
		},
		{
			"two scripts",
			"<script>1</script><script>2</script>",
			"default-src 'none'; script-src 'sha256-a4ayc/80/OGda4BO/1o/V0etpOqiLx1JwB5S3beHW0s=' 'sha256-1HNeOiZeFu7gP1lxi5tdAwGcB9i2xR+Q2jpmbuwTqzU='; style-src 'none'; ",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := buildCSP([]byte(tc.html))
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("buildCSP = %q, want prefix %q", got, tc.want)
			}
			if !strings.Contains(got, "connect-src 'self'") || !strings.Contains(got, "frame-ancestors 'none'") {
				t.Fatalf("buildCSP = %q: missing connect-src or frame-ancestors", got)
			}
		})
	}
	if c := ContentSecurityPolicy(); strings.Contains(c, "'none'; style-src") || strings.Contains(c, "style-src 'none'") {
		t.Fatalf("the page's own CSP does not allow its script and style: %s", c)
	}
}
