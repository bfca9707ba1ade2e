package arrival

import (
	"fmt"
	"math"
	"time"

	"go.uber.org/ratelimit"
)

// NewWireLimiter returns a limiter for the dispatcher to Take right before
// each send, a second guard behind the schedule's own ceiling: if the
// dispatcher falls behind and then catches up, it cannot fire its overdue
// sends faster than maxRate. In any window of length W the wire sees at most
// floor(W·maxRate)+2 sends: one more than strict spacing allows.
//
// That one permission of slack is deliberate. Without it, ratelimit anchors
// the next permission to the actual time of a late send, so every timer
// overshoot of the dispatcher is inherited by all later sends of a schedule
// running at its ceiling: the lag ratchets up to the worst overshoot seen
// (measured: a 7 ms median lag at 200 req/s). With one permission of slack
// the grid stays anchored to the schedule, and a send late by less than one
// interval does not delay the next.
//
// The spacing is 1e9/maxRate truncated to whole nanoseconds (ratelimit works
// in nanoseconds), so the wire may run faster than maxRate by at most 1 ns per
// gap, the same rounding the schedule has. Truncating rather than rounding up
// matters: a schedule running exactly at its ceiling must never be delayed a
// little more at every send, which would build an unbounded lag.
//
// opts is for tests (ratelimit.WithClock); any Per or slack option in it is
// overridden. maxRate must be in (0, MaxRateLimit], as Schedule.MaxRate
// always is; NewWireLimiter panics otherwise, like time.NewTicker does for a
// non-positive period, because a limiter without a valid ceiling cannot keep
// its promise.
func NewWireLimiter(maxRate float64, opts ...ratelimit.Option) ratelimit.Limiter {
	if math.IsNaN(maxRate) || maxRate <= 0 || maxRate > MaxRateLimit {
		panic(fmt.Sprintf("arrival: NewWireLimiter: maxRate must be in (0, %g], got %v", float64(MaxRateLimit), maxRate))
	}
	per := wireSpacing(maxRate)
	all := make([]ratelimit.Option, 0, len(opts)+2)
	all = append(all, opts...)
	all = append(all, ratelimit.Per(per), ratelimit.WithSlack(1)) // last, so they win
	return ratelimit.New(1, all...)
}

// wireSpacing is the minimum time between two permissions.
func wireSpacing(maxRate float64) time.Duration {
	return max(time.Duration(1e9/maxRate), 1)
}
