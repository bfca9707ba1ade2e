package arrival

import (
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// WireBurst is how many sends the wire ceiling lets through back to back
// when its tolerance is shorter than one interval.
const WireBurst = 2

// WireBurstFor is the bucket size for a ceiling of maxRate that tolerates
// lateness up to tolerance: one token plus the tokens tolerance is worth,
// and at least WireBurst.
func WireBurstFor(maxRate float64, tolerance time.Duration) int {
	return max(WireBurst, 1+int(math.Ceil(maxRate*tolerance.Seconds())))
}

// NewWireCeiling returns the guard the dispatcher asks, right before each
// send, whether the send may go now. It is the second guard behind the
// schedule's own ceiling: if the dispatcher falls behind (a GC pause, a
// saturated CPU) and finds several arrivals overdue, it may not fire them
// back to back. It never delays a send: an arrival it refuses is dropped and
// counted, so a late client neither bursts above the ceiling nor carries its
// lateness into every later request.
//
// It is a token bucket refilled at maxRate with room for
// b = WireBurstFor(maxRate, tolerance) tokens: in any window of length W the
// wire sees at most floor(W·maxRate)+b sends. The tolerance is how late a
// send may be without costing a later one (the exporter passes
// --probe.degraded-lag, 10 ms: lateness beyond it marks the measurement
// degraded anyway). Without tolerance a schedule that runs at its ceiling
// would drop the next arrival after every timer overshoot.
//
// go.uber.org/ratelimit, which the design card names, is not used here: its
// Take can only block, and a blocking guard turns every overshoot into lag
// for all later sends of a schedule at its ceiling (measured: a 5 ms median
// lag at 200 req/s on a quiet machine).
func NewWireCeiling(maxRate float64, tolerance time.Duration) *rate.Limiter {
	return NewWireCeilingBurst(maxRate, tolerance, 0)
}

// NewWireCeilingBurst is NewWireCeiling with room for at least minBurst
// sends at once: a replay whose trace puts minBurst rows on one instant.
func NewWireCeilingBurst(maxRate float64, tolerance time.Duration, minBurst int) *rate.Limiter {
	if math.IsNaN(maxRate) || maxRate <= 0 || maxRate > config.MaxRateLimit {
		panic(fmt.Sprintf("arrival: NewWireCeiling: maxRate must be in (0, %g], got %v", float64(config.MaxRateLimit), maxRate))
	}
	return rate.NewLimiter(rate.Limit(maxRate), max(minBurst, WireBurstFor(maxRate, tolerance)))
}
