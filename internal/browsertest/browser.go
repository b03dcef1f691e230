package browsertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// ChromiumPath is Debian's chromium, or $RELAY_CHROMIUM; without it the
// test fails saying how to install it.
func ChromiumPath(tb testing.TB) string {
	tb.Helper()
	p := os.Getenv("RELAY_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if st, err := os.Stat(p); err != nil || st.IsDir() {
		tb.Fatalf("the browser test needs Chromium at %s (set RELAY_CHROMIUM to use another): install it with `apt-get install chromium` (%v)", p, err)
	}
	return p
}

// ArtifactPath is where a page's screenshot goes: $RELAY_ARTIFACTS, or
// build/artifacts under the module root.
func ArtifactPath(tb testing.TB, name string) string {
	tb.Helper()
	dir := os.Getenv("RELAY_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(moduleRoot(tb), "build", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// moduleRoot is the closest directory holding a go.mod, from the working
// directory up: a test runs in its package's directory, inside the module.
func moduleRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			tb.Fatalf("no go.mod above %s: set RELAY_ARTIFACTS", dir)
		}
	}
}

// dataDir is a profile directory for one Chromium run. It is not
// tb.TempDir: Chromium's helper processes can still be writing into it for a
// moment after the browser is stopped, which made TempDir's cleanup fail
// the test ("directory not empty"). This one is removed with retries.
func dataDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "relay-chromium-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for i := 0; ; i++ {
			err := os.RemoveAll(dir)
			if err == nil {
				return
			}
			if i == 50 {
				tb.Logf("could not remove the browser profile %s: %v", dir, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return dir
}

// Start starts headless Chromium for tb and returns the context of its
// first tab, which ends after timeout; the browser stops when the test ends.
// The flags keep it quiet and self-contained: no sandbox (tests run as root
// in containers), no GPU, nothing fetched in the background, a fixed window.
func Start(tb testing.TB, timeout time.Duration) context.Context {
	tb.Helper()
	exe := ChromiumPath(tb)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(dataDir(tb)),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	tb.Cleanup(func() {
		cancelTimeout()
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Run(ctx); err != nil { // starts the browser
		tb.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// privateTab opens a tab in a new browser context of browser's — its
// own cookies and storage, like a separate user's browser — and returns its
// context; the browser context is disposed of when the test ends. It opens
// the tab in a new window: headless Chromium refuses a new context's tab
// without one ("Failed to open new tab - no browser is open"), which is
// what chromedp.WithNewBrowserContext runs into.
func privateTab(tb testing.TB, browser context.Context) context.Context {
	tb.Helper()
	var id target.ID
	var bc cdp.BrowserContextID
	err := chromedp.Run(browser, chromedp.ActionFunc(func(ctx context.Context) error {
		exec := cdp.WithExecutor(ctx, chromedp.FromContext(ctx).Browser)
		var err error
		if bc, err = target.CreateBrowserContext().WithDisposeOnDetach(true).Do(exec); err != nil {
			return err
		}
		id, err = target.CreateTarget("about:blank").WithBrowserContextID(bc).WithNewWindow(true).Do(exec)
		return err
	}))
	if err != nil {
		tb.Fatalf("open a tab in a new browser context: %v", err)
	}
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithTargetID(id))
	// The first Run attaches the tab with ctx itself: chromedp ties the
	// tab's event loop to the context of that first Run, so a step's
	// shorter-lived context there would leave the tab dead after the step.
	if err := chromedp.Run(ctx); err != nil {
		tb.Fatalf("attach to the new tab: %v", err)
	}
	tb.Cleanup(func() {
		cancel()
		_ = chromedp.Run(browser, chromedp.ActionFunc(func(ctx context.Context) error {
			return target.DisposeBrowserContext(bc).Do(cdp.WithExecutor(ctx, chromedp.FromContext(ctx).Browser))
		}))
	})
	return ctx
}

// Problems collects what a tab reports as wrong: script exceptions and
// console or log errors and warnings (a Content-Security-Policy violation is
// one).
type Problems struct {
	mu   sync.Mutex
	list []string
}

// watchProblems starts collecting ctx's tab's problems.
func watchProblems(ctx context.Context) *Problems {
	p := &Problems{}
	chromedp.ListenTarget(ctx, func(ev any) {
		var s string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			s = "exception: " + ev.ExceptionDetails.Error()
		case *runtime.EventConsoleAPICalled:
			if ev.Type != runtime.APITypeError && ev.Type != runtime.APITypeWarning {
				return
			}
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value))
			}
			s = fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " "))
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level != cdplog.LevelError && ev.Entry.Level != cdplog.LevelWarning {
				return
			}
			s = fmt.Sprintf("log %s: %s (%s)", ev.Entry.Level, ev.Entry.Text, ev.Entry.URL)
		default:
			return
		}
		p.mu.Lock()
		p.list = append(p.list, s)
		p.mu.Unlock()
	})
	return p
}

// All returns the problems reported so far.
func (p *Problems) All() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.list...)
}

// Check fails the test if the tab reported any problem.
func (p *Problems) Check(tb testing.TB) {
	tb.Helper()
	if l := p.All(); len(l) > 0 {
		tb.Fatalf("the page reported problems:\n%s", strings.Join(l, "\n"))
	}
}

// screenshot writes a full-page screenshot of ctx's tab to name under
// ArtifactPath.
func screenshot(tb testing.TB, ctx context.Context, name string) {
	tb.Helper()
	var png []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		tb.Fatalf("screenshot %s: %v", name, err)
	}
	path := ArtifactPath(tb, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("screenshot: %s (%d bytes)", path, len(png))
}
