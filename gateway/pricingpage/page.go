package pricingpage

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"slices"
)

//go:embed index.html
var page []byte

// Page returns the price page, a UTF-8 HTML document. The slice is the
// caller's.
func Page() []byte { return slices.Clone(page) }

// csp is computed once from the page itself.
var csp = buildCSP(page)

// ContentSecurityPolicy is the Content-Security-Policy to serve the page
// with: nothing may load but the page's own inline style and script (allowed
// by their SHA-256 hashes, so no other inline code runs) and requests to its
// own origin (the price table).
func ContentSecurityPolicy() string { return csp }

// buildCSP hashes the text of every <style> and <script> element of html.
func buildCSP(html []byte) string {
	return "default-src 'none'; script-src " + hashes(html, "script") +
		"; style-src " + hashes(html, "style") +
		"; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// hashes lists 'sha256-…' of the content of each <tag>…</tag> element, or
// 'none' when there is none.
func hashes(html []byte, tag string) string {
	open, end := []byte("<"+tag+">"), []byte("</"+tag+">")
	var out []byte
	for rest := html; ; {
		i := bytes.Index(rest, open)
		if i < 0 {
			break
		}
		rest = rest[i+len(open):]
		j := bytes.Index(rest, end)
		if j < 0 {
			break
		}
		sum := sha256.Sum256(rest[:j])
		if len(out) > 0 {
			out = append(out, ' ')
		}
		out = append(out, "'sha256-"...)
		out = base64.StdEncoding.AppendEncode(out, sum[:])
		out = append(out, '\'')
		rest = rest[j+len(end):]
	}
	if len(out) == 0 {
		return "'none'"
	}
	return string(out)
}
