package gateway

import (
	"math"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/store"
)

func TestWindowQuantile(t *testing.T) {
	t.Parallel()
	buckets := []float64{math.Inf(-1), 0, 1e-6, 1e-3, 0.1, math.Inf(1)}
	prev := []uint64{0, 5, 100, 7, 3}
	cases := []struct {
		name string
		cur  []uint64
		q    float64
		want time.Duration
	}{
		{"too few runs", []uint64{0, 5, 100 + shedMinRuns - 2, 7, 3 + 1}, 0.99, 0},
		{"all fast", []uint64{0, 5, 200, 7, 3}, 0.99, time.Microsecond},
		{"one percent slow", []uint64{0, 5, 199, 7, 4}, 0.99, time.Microsecond},
		{"two percent slow", []uint64{0, 5, 198, 9, 3}, 0.99, time.Millisecond},
		{"the slowest bucket", []uint64{0, 5, 100, 7, 103}, 0.99, 100 * time.Millisecond},
		{"the median", []uint64{0, 5, 150, 57, 3}, 0.5, time.Microsecond},
		{"a bucket from zero", []uint64{0, 105, 100, 7, 3}, 0.99, 0},
		{"a bucket from -Inf", []uint64{100, 5, 100, 7, 3}, 0.99, 0},
	}
	for _, tc := range cases {
		if got := windowQuantile(prev, tc.cur, buckets, tc.q); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The share: nothing until the delay has been above the target for
// shedInterval, then up by a quarter (at least shedStart) per window to
// shedMax, then down by an eighth per window under the target, also across
// a gap with no calls, to 0 under shedFloor.
func TestShedderSteps(t *testing.T) {
	t.Parallel()
	s := newShedder(10 * time.Millisecond)
	now := time.Now()
	win := func(d time.Duration) uint32 {
		now = now.Add(shedWindow)
		s.step(now, d)
		return s.p.Load()
	}
	if p := win(10 * time.Millisecond); p != 0 {
		t.Fatalf("at the target: share %d", p)
	}
	for i := 1; i < int(shedInterval/shedWindow); i++ {
		if p := win(50 * time.Millisecond); p != 0 {
			t.Fatalf("window %d above the target: share %d before shedInterval", i, p)
		}
	}
	if p := win(50 * time.Millisecond); p != shedStart {
		t.Fatalf("after shedInterval above the target: share %d, want %d", p, shedStart)
	}
	// A window under the target ends the run: the next run starts over.
	if p := win(time.Millisecond); p != shedStart-shedStart/8 {
		t.Fatalf("one window under: share %d, want %d", p, shedStart-shedStart/8)
	}
	p := s.p.Load()
	for i := 0; i < 40; i++ {
		next := win(time.Second)
		want := min(max(p+shedStart, p+p/4), shedMax)
		if next != want {
			t.Fatalf("window %d above: share %d, want %d", i, next, want)
		}
		p = next
	}
	if p != shedMax {
		t.Fatalf("share %d after 40 windows above, want the cap %d", p, shedMax)
	}
	for i := 0; p >= shedFloor; i++ {
		next := win(0)
		if want := p - p/8; next != want && !(want < shedFloor && next == 0) {
			t.Fatalf("window %d under: share %d, want %d", i, next, want)
		}
		if i > 40 {
			t.Fatalf("the share never ends: %d", next)
		}
		p = next
	}
	if p != 0 {
		t.Fatalf("share %d under the floor, want 0", p)
	}

	// A gap with no calls: the share decays as over that many windows.
	s.p.Store(shedMax)
	s.idle(4)
	if want := decay(decay(decay(decay(shedMax)))); s.p.Load() != want {
		t.Errorf("after 4 idle windows: share %d, want %d", s.p.Load(), want)
	}
	s.idle(1000)
	if s.p.Load() != 0 {
		t.Errorf("after a long gap: share %d", s.p.Load())
	}

	// Off: never refuses, whatever it would measure.
	off := newShedder(-1)
	off.p.Store(shedMax)
	for range 100 {
		if off.refuse(time.Now()) {
			t.Fatal("a shedder with no target refused a call")
		}
	}
}

func TestShedderRefusesTheShare(t *testing.T) {
	t.Parallel()
	s := newShedder(time.Hour) // measures, never steps up
	s.p.Store(shedScale / 4)
	s.next.Store(math.MaxInt64) // no window ends: the share stays
	const n = 20000
	refused := 0
	for range n {
		if s.refuse(time.Now()) {
			refused++
		}
	}
	if refused < n/4-600 || refused > n/4+600 { // ±9.8 standard deviations
		t.Errorf("refused %d of %d at a share of 1/4", refused, n)
	}
	if s.shed.Load() != uint64(refused) {
		t.Errorf("counted %d refusals, made %d", s.shed.Load(), refused)
	}
}

// While the process's goroutines wait for a CPU longer than overload_delay,
// new calls are refused with 503 overloaded and Retry-After before anything
// is held or charged; once the queue is gone, calls are admitted again.
func TestOverloadSheds(t *testing.T) {
	// Not parallel: it measures the scheduler's delay, which other tests would add to.
	if os.Getenv(envStoreVar) == "postgres" {
		// The queue here is made by spinning goroutines, and the shedder
		// needs shedMinRuns sampled runs per 25 ms window as evidence: on
		// PostgreSQL each call spends most of its time waiting for the
		// database, so this test's eight clients make too few runs per
		// window to count. Real overload makes plenty; the shedder reads
		// the scheduler, not the store, and the Badger run covers it.
		t.Skip("on the PostgreSQL store the test's artificial queue yields too few sampled runs per window; covered by the Badger run")
	}
	// 20 ms: far above what a loaded CI machine running -race makes a
	// goroutine wait, far below the queue made here.
	// The plugins' deadline is raised: this test starves every goroutine on
	// purpose, and what it checks is the refusals, not the plugins.
	e := newEnv(t, func(c *config.Config) {
		c.Limits.OverloadDelay = 20 * time.Millisecond
		c.Plugins.CallTimeout = 10 * time.Second
	})
	e.account("acme", "100")
	key := e.key("acme", "auto")

	stopSpinning := startRunQueue()
	defer stopSpinning()
	r := callUntilShed(t, e, key)
	stopSpinning()
	if r.shed == 0 {
		t.Fatalf("no call refused in 20 s of a queue (%d answered; last delay %v)", r.ok, time.Duration(e.gw.shed.delay.Load()))
	}
	checkRefusal(t, e, r)

	// Nothing held or charged for a refused call.
	if _, kinds := journalSum(t, e, "acme"); kinds[store.KindCharge] != r.ok || len(kinds) != 2 {
		t.Errorf("journal %v for %d answered calls (and %d refused)", kinds, r.ok, r.shed)
	}
	if b := e.balance("acme"); b.Held != 0 {
		t.Errorf("held %v after every call ended", b.Held)
	}

	// The queue gone, the share decays and calls are admitted again.
	inARow := 0
	for deadline := time.Now().Add(20 * time.Second); inARow < 20 && time.Now().Before(deadline); {
		if st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "after")); st == http.StatusOK {
			inARow++
		} else if st == http.StatusServiceUnavailable {
			inARow = 0
		} else {
			t.Fatalf("status %d: %s", st, data)
		}
	}
	if inARow < 20 {
		t.Errorf("calls still refused 20 s after the queue ended (share %.2f, last delay %v)",
			e.gw.shed.share(), time.Duration(e.gw.shed.delay.Load()))
	}
	st, _, data := e.do("GET", "/metrics", "", nil)
	if st != 200 || !strings.Contains(string(data), "relay_overload_shed_total ") || !strings.Contains(string(data), "relay_overload_queue_delay_seconds ") {
		t.Errorf("/metrics lacks the overload series: %d", st)
	}
}

// startRunQueue makes a run queue: four goroutines per P that never
// yield. The runtime preempts each after 10 ms, so every other run waits
// about 30 ms. The function it returns ends them; it may be called twice.
func startRunQueue() (stop func()) {
	var stopped atomic.Bool
	var spin sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		spin.Add(1)
		go func() {
			defer spin.Done()
			for !stopped.Load() {
			}
		}()
	}
	return sync.OnceFunc(func() { stopped.Store(true); spin.Wait() })
}

// shedRun is what the clients of callUntilShed saw: the calls answered,
// the calls refused, and the last refusal.
type shedRun struct {
	ok, shed int
	refusal  struct {
		h    http.Header
		body []byte
	}
}

// callUntilShed calls from eight clients at once, as an overloaded
// gateway gets them, until one is refused or 20 s have passed.
func callUntilShed(t *testing.T, e *env, key string) shedRun {
	var (
		mu       sync.Mutex
		r        shedRun
		clients  sync.WaitGroup
		deadline = time.Now().Add(20 * time.Second)
	)
	for range 8 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for time.Now().Before(deadline) {
				mu.Lock()
				done := r.shed > 0
				mu.Unlock()
				if done {
					return
				}
				st, h, data := e.do("POST", "/v1/chat/completions", key, chatBody("modelf-flash", "under load"))
				mu.Lock()
				switch st {
				case http.StatusOK:
					r.ok++
				case http.StatusServiceUnavailable:
					r.shed++
					r.refusal.h, r.refusal.body = h, data
				default:
					t.Errorf("status %d: %s", st, data)
				}
				mu.Unlock()
			}
		}()
	}
	clients.Wait()
	return r
}

// checkRefusal wants the refusal in the error shape, overloaded, with
// Retry-After: 1, not logged as an error, and every refusal counted.
func checkRefusal(t *testing.T, e *env, r shedRun) {
	t.Helper()
	msg, typ, code := errBody(t, r.refusal.body)
	if typ != "service_unavailable_error" || code != "overloaded" || !strings.Contains(msg, "overloaded; retry") ||
		!strings.HasSuffix(msg, r.refusal.h.Get("X-Request-Id")) {
		t.Errorf("refusal: type %q, code %v, message %q", typ, code, msg)
	}
	if ra := r.refusal.h.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want 1", ra)
	}
	if strings.Contains(e.logs.String(), `"level":"ERROR"`) {
		t.Errorf("a refusal was logged as an error:\n%s", e.logs.String())
	}
	if got := e.gw.shed.shed.Load(); got != uint64(r.shed) {
		t.Errorf("relay_overload_shed_total counted %d, the clients saw %d", got, r.shed)
	}
}
