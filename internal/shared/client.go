package shared

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// pingEvery is how often the background ping checks Redis: it notices a
// failure between commands and, while Redis is down, its recovery.
const pingEvery = 250 * time.Millisecond

// Client is a Redis client with health tracking. Up is false from the
// first failed command (or ping) until a ping answers again; while it is
// false, callers skip Redis and use their local fallbacks, so a dead Redis
// costs no time per request.
type Client struct {
	cfg Config
	rdb *redis.Client
	log *slog.Logger

	up   atomic.Bool
	mu   sync.Mutex // serialises the transitions (one log line each)
	onUp []func()
	upG  prometheus.Gauge
	errs *prometheus.CounterVec
	// life ends when the Client is closed: it bounds the background
	// goroutines, not any request.
	life   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Open connects to the Redis cfg names (cfg must be resolved and enabled)
// and starts the background ping. An unreachable Redis is not an error: the
// Client starts down and comes up when Redis answers.
func Open(cfg Config, log *slog.Logger) (*Client, error) {
	if !cfg.Enabled() {
		return nil, errors.New("redis: no url")
	}
	opt, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, errors.New("redis.url: cannot parse it") // the error could quote a password
	}
	opt.DialTimeout = cfg.Timeout
	opt.ReadTimeout = cfg.Timeout
	opt.WriteTimeout = cfg.Timeout
	opt.PoolTimeout = cfg.Timeout
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1 // a retry would double the time a slow Redis costs a call
	opt.DialerRetries = 1
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if log == nil {
		log = slog.Default()
	}
	quietOnce.Do(func() { redis.SetLogger(quiet{}) })
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		cfg:    cfg,
		rdb:    redis.NewClient(opt),
		log:    log,
		life:   ctx,
		cancel: cancel,
		upG: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "relay_redis_up",
			Help: "1 while the shared Redis answers; 0 while replicas fall back to per-replica limits and cooldowns.",
		}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_redis_errors_total",
			Help: "Redis commands that failed or timed out, by operation.",
		}, []string{"op"}),
	}
	c.check(ctx)
	if !c.up.Load() {
		c.log.Warn("redis is unavailable at start: limits, key revocations and cooldowns are per replica until it answers", "timeout", cfg.Timeout.String())
	}
	c.wg.Add(1)
	go c.pingLoop(ctx)
	return c, nil
}

// quiet drops go-redis's own log lines (one per failed dial, several a
// second while Redis is down): the Client says once per change of state
// what matters, and counts the failures in relay_redis_errors_total.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var quietOnce sync.Once

// Config is the configuration the Client was opened with.
func (c *Client) Config() Config { return c.cfg }

// Prefix is the key and channel prefix.
func (c *Client) Prefix() string { return c.cfg.Prefix }

// Redis is the underlying client. Commands on it should use Ctx and report
// failures to Fail.
func (c *Client) Redis() *redis.Client { return c.rdb }

// Up says whether Redis answered the last command or ping.
func (c *Client) Up() bool { return c.up.Load() }

// Ctx bounds one command by redis.timeout.
func (c *Client) Ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.Timeout)
}

// OnUp registers f to run (in its own goroutine) each time Redis comes
// back up after being down, and at the first successful ping.
func (c *Client) OnUp(f func()) {
	c.mu.Lock()
	c.onUp = append(c.onUp, f)
	c.mu.Unlock()
}

// Fail records a failed command of operation op: Redis counts as down until
// a ping answers. A nil error or redis.Nil (no such key) is no failure.
func (c *Client) Fail(op string, err error) {
	if err == nil || errors.Is(err, redis.Nil) {
		return
	}
	c.errs.WithLabelValues(op).Inc()
	c.setUp(false, err)
}

func (c *Client) setUp(up bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.up.Load() == up {
		return
	}
	c.up.Store(up)
	if up {
		c.upG.Set(1)
		c.log.Info("redis is answering: limits, key revocations and cooldowns are shared across replicas")
		for _, f := range c.onUp {
			go f()
		}
		return
	}
	c.upG.Set(0)
	why := "failed"
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		why = "timed out"
	}
	mode := "per-replica limits at 1/" + fmt.Sprint(c.cfg.Replicas) + " of each global rate"
	if c.cfg.FailClosed {
		mode = "rate-limited requests are refused with 503 (redis.fail_closed)"
	}
	c.log.Warn("redis is unavailable: "+mode+"; key revocations and cooldowns reach other replicas only through the cache expiry",
		"error", boundedErr(err), "reason", why)
}

func boundedErr(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

func (c *Client) check(ctx context.Context) {
	cctx, cancel := c.Ctx(ctx)
	err := c.rdb.Ping(cctx).Err()
	cancel()
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		c.Fail("ping", err)
		return
	}
	c.setUp(true, nil)
}

func (c *Client) pingLoop(ctx context.Context) {
	defer c.wg.Done()
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.check(ctx)
		}
	}
}

// Collectors are the Client's metrics.
func (c *Client) Collectors() []prometheus.Collector {
	return []prometheus.Collector{c.upG, c.errs}
}

// Close stops the background work and closes the connections.
func (c *Client) Close() error {
	c.cancel()
	c.wg.Wait()
	return c.rdb.Close()
}

// Subscribe delivers the messages of channel (the prefix is added) to
// handle, in one goroutine, until the Client is closed. resubscribed runs
// each time the subscription is made again (at the start and after a lost
// connection): messages sent in between are lost, so it should drop what
// they could have changed.
func (c *Client) Subscribe(channel string, handle func(payload string), resubscribed func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.subscribeLoop(c.life, c.cfg.Prefix+channel, handle, resubscribed)
	}()
}

func (c *Client) subscribeLoop(ctx context.Context, channel string, handle func(string), resubscribed func()) {
	ps := c.rdb.Subscribe(ctx, channel) // a failure here is retried by Receive
	defer ps.Close()
	for {
		msg, err := ps.ReceiveTimeout(ctx, time.Second)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue // no message within the second
			}
			// The connection is gone; Receive dials again (and subscribes
			// again) on its next call. Pace the attempts.
			t := time.NewTimer(pingEvery)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				resubscribed()
			}
		case *redis.Message:
			handle(m.Payload)
		}
	}
}
