package prober

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ceilings keeps, per target origin, the probes running and a rate limiter
// shared by every probe of that origin, so that no number of scrapes can
// push more than the configured load onto one server.
//
// The rate limiter is golang.org/x/time/rate with a burst of 1: sends are
// spaced at least 1/rate apart, so any window of W seconds holds at most
// W*rate+1 of them. It is used rather than go.uber.org/ratelimit because a
// probe must fail fast: rate.Limiter
// reports how long the next permission is away (so a probe whose requests
// cannot all be sent before its deadline is refused before it sends any),
// and its Wait gives up at once when the context's deadline comes first.
// ratelimit's Take can only block, and cannot be cancelled.
type ceilings struct {
	mu      sync.Mutex
	targets map[string]*targetCeiling
	// maxTracked bounds the map: host patterns allow unboundedly many
	// names. Idle entries are dropped when it is full.
	maxTracked int
}

type targetCeiling struct {
	active  int // probes running; guarded by ceilings.mu
	limiter *rate.Limiter
}

const defaultMaxTracked = 1024

func newCeilings() *ceilings {
	return &ceilings{targets: map[string]*targetCeiling{}, maxTracked: defaultMaxTracked}
}

// acquire admits one probe of origin, or refuses it at once when
// maxProbes are already running. The caller must release an admitted
// probe.
func (c *ceilings) acquire(origin string, maxProbes int, rps float64) (*targetCeiling, *refusal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tc, ok := c.targets[origin]
	if !ok {
		if len(c.targets) >= c.maxTracked {
			c.evictIdleLocked()
		}
		if len(c.targets) >= c.maxTracked {
			return nil, refuse(ReasonConcurrencyCeiling, "probes are running against %d targets already; refusing a new one", len(c.targets))
		}
		tc = &targetCeiling{limiter: rate.NewLimiter(rate.Limit(rps), 1)}
		c.targets[origin] = tc
	}
	// A reloaded configuration may have changed the ceiling.
	if tc.limiter.Limit() != rate.Limit(rps) {
		tc.limiter.SetLimit(rate.Limit(rps))
	}
	if tc.active >= maxProbes {
		return nil, refuse(ReasonConcurrencyCeiling, "%s already has %d probes running (probe.max_concurrent_probes is %d); refused without sending",
			origin, tc.active, maxProbes)
	}
	tc.active++
	return tc, nil
}

func (c *ceilings) release(tc *targetCeiling) {
	c.mu.Lock()
	tc.active--
	c.mu.Unlock()
}

// evictIdleLocked drops entries with no probe running whose limiter is full
// again: forgetting them changes nothing.
func (c *ceilings) evictIdleLocked() {
	now := time.Now()
	for origin, tc := range c.targets {
		if tc.active == 0 && tc.limiter.TokensAt(now) >= 1 {
			delete(c.targets, origin)
		}
	}
}

// timeToSend is how long from now until n more requests may all have been
// sent, if no one else sends: the n-th permission comes (n - tokens)/rate
// from now.
func (tc *targetCeiling) timeToSend(n int, now time.Time) time.Duration {
	missing := float64(n) - tc.limiter.TokensAt(now)
	if missing <= 0 {
		return 0
	}
	return time.Duration(missing / float64(tc.limiter.Limit()) * float64(time.Second))
}

// wait blocks until one request may be sent. It fails at once, sending
// nothing, when that moment lies past ctx's deadline.
func (tc *targetCeiling) wait(ctx context.Context) error {
	return tc.limiter.Wait(ctx)
}
