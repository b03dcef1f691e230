package browsertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Tab is one user of a web server: a tab in a browser context of its own,
// so its cookies are its alone, with the problems its pages report.
type Tab struct {
	tb       testing.TB
	ctx      context.Context
	problems *Problems
	base     string
	shots    string
}

// NewTab opens a private tab in browser for pages under base (the server's
// URL, "http://127.0.0.1:8080"); its screenshots are named shots+name+".png".
func NewTab(tb testing.TB, browser context.Context, base, shots string) *Tab {
	tb.Helper()
	ctx := privateTab(tb, browser)
	return &Tab{tb: tb, ctx: ctx, problems: watchProblems(ctx), base: base, shots: shots}
}

// Base is the server's URL the tab's paths are under.
func (c *Tab) Base() string { return c.base }

// Step bounds one step of a Tab, so that a page that never shows what the
// test waits for fails with that page's text rather than at the test's end.
const Step = 15 * time.Second

// Run runs actions in the tab; when they fail it reports the page's URL,
// its text and the problems the tab reported.
func (c *Tab) Run(what string, actions ...chromedp.Action) {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, Step)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var loc, text string
		diag, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		defer cancel()
		_ = chromedp.Run(diag, chromedp.Location(&loc),
			chromedp.Evaluate(`document.body ? document.body.innerText.slice(0, 600) : ""`, &text))
		c.tb.Fatalf("%s: %v\nat %s the page says:\n%s\nproblems: %q", what, err, loc, text, c.problems.All())
	}
}

// Open loads path and waits for sel; with a name, it saves a screenshot.
func (c *Tab) Open(path, sel, name string) {
	c.tb.Helper()
	c.Run("open "+path, chromedp.Navigate(c.base+path), chromedp.WaitVisible(sel, chromedp.ByQuery))
	if name != "" {
		c.Screenshot(name)
	}
}

// Screenshot saves the page as shots+name+".png" under ArtifactPath.
func (c *Tab) Screenshot(name string) {
	c.tb.Helper()
	screenshot(c.tb, c.ctx, c.shots+name+".png")
}

// CheckProblems fails the test if the tab reported any problem.
func (c *Tab) CheckProblems() {
	c.tb.Helper()
	c.problems.Check(c.tb)
}

// Has reports whether the page has an element matching sel.
func (c *Tab) Has(sel string) bool {
	c.tb.Helper()
	var ok bool
	c.Run("look for "+sel, chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%q) !== null`, sel), &ok))
	return ok
}

// Text is the text of the element matching sel.
func (c *Tab) Text(sel string) string {
	c.tb.Helper()
	var s string
	c.Run("read "+sel, chromedp.Text(sel, &s, chromedp.ByQuery))
	return s
}

// Submit clicks the button sel and waits until the page that answers the
// form has replaced the current one (a mark left in the old page is gone).
func (c *Tab) Submit(what, sel string) {
	c.tb.Helper()
	c.Run(what,
		chromedp.Evaluate(`window.relayOldPage = true`, nil),
		chromedp.Click(sel, chromedp.ByQuery),
		chromedp.ActionFunc(WaitNewPage))
}

// WaitNewPage waits until the tab shows a fully loaded page without the
// mark Submit leaves in the old one (set window.relayOldPage before a
// navigation to use it elsewhere). It polls from Go: a poll inside the page
// would not survive the navigation.
func WaitNewPage(ctx context.Context) error {
	for {
		var fresh bool
		err := chromedp.Evaluate(`window.relayOldPage !== true && document.readyState === "complete"`, &fresh).Do(ctx)
		if err == nil && fresh {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
