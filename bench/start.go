package bench

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// startNow starts every repeat when the one before it has ended: a run
// without the shards' clock.
type startNow struct{}

func (startNow) reserve(time.Duration) time.Time { return time.Time{} }

func (startNow) begin(context.Context, repeatPlan, time.Time, *slog.Logger, *progress) (repeatStart, error) {
	return repeatStart{t0: time.Now()}, nil
}

func (startNow) agreement() (time.Time, time.Duration) { return time.Time{}, 0 }

// shardClock is the schedule of repeat starts that every shard of a run
// computes alike, with no word between them: the first repeat starts at
// the instant given to all (--shard.start-at), and each next one at the
// previous one's agreed start plus its planned length (load.length:
// warm-up + duration, or a replay's window, the same on every shard) plus
// the slack. A repeat's end cannot be agreed on, since each shard drains
// its own requests; its planned start can. A shard that overruns a slot
// starts its next repeat late, at once, and says so; the one after is on
// the agreed schedule again, since every start is counted from the
// agreed ones, never from a late one.
type shardClock struct {
	startAt time.Time // the first repeat's, --shard.start-at
	next    time.Time // the agreed start of the next repeat
	slack   time.Duration
}

// plan takes the agreed start of the next repeat, of the given planned
// length, and moves the clock past it.
func (c *shardClock) plan(length time.Duration) time.Time {
	at := c.next
	c.next = at.Add(length + c.slack)
	return at
}

// waitUntil waits until at, or ctx's end. It returns the instant the
// repeat's schedule starts from, at itself when the wait reached it, now
// when at had already passed, and the instant it woke.
func waitUntil(ctx context.Context, at time.Time) (origin, woke time.Time, err error) {
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return time.Time{}, time.Time{}, ctx.Err()
		case <-t.C:
		}
		return at, time.Now(), nil
	}
	now := time.Now()
	return now, now, nil
}

// newShardClock is the clock of a run whose first repeat starts at startAt,
// each later one slack after its predecessor's planned end.
func newShardClock(startAt time.Time, slack time.Duration) *shardClock {
	return &shardClock{startAt: startAt, next: startAt, slack: slack}
}

// reserve is plan: the agreed start of the next repeat.
func (c *shardClock) reserve(length time.Duration) time.Time { return c.plan(length) }

// agreement is the first repeat's start and the slack.
func (c *shardClock) agreement() (time.Time, time.Duration) { return c.startAt, c.slack }

// begin waits for the agreed instant, or starts now when it has passed:
// the repeat's schedule starts at the agreed instant, not when this
// process woke, so that every shard's schedule has one origin, and a late
// wake-up is its first arrivals' lag, caught up.
func (c *shardClock) begin(ctx context.Context, p repeatPlan, agreed time.Time, logger *slog.Logger, bar *progress) (repeatStart, error) {
	c.sayWait(ctx, p, agreed, time.Now(), logger, bar)
	t0, started, err := waitUntil(ctx, agreed)
	if err != nil {
		return repeatStart{}, fmt.Errorf("cell %s: interrupted: %w", p.cell, err)
	}
	bar.startsAt(t0, "")
	if msg := lateStartWarning(agreed, t0, started); msg != "" {
		logger.Warn(msg, "cell", p.cell, "repeat", p.index+1, "agreed", agreed.UTC().Format(time.RFC3339Nano), "late", started.Sub(agreed).Round(time.Millisecond))
	}
	// The agreed instant, every shard's: their arrivals are due together
	// (the recorder's clock counts from it too); how late this host woke
	// after it is apart.
	return repeatStart{t0: t0, origin: t0, wakeupLate: report.Num(started.Sub(agreed).Seconds())}, nil
}

// sayWait says, when the repeat's agreed start is ahead of now, how long
// it waits and until when: the first repeat's wait for --shard.start-at,
// a later one's for what its drain left of --shard.slack. A process idle
// for minutes, or for the slack after every repeat, says why. The log says
// it at info level, and, while a bar is drawn, the bar says it (its
// repeat's length and the time left count the wait) and the log at debug
// level, as for every repeat's own lines.
func (c *shardClock) sayWait(ctx context.Context, p repeatPlan, agreed, now time.Time, logger *slog.Logger, bar *progress) {
	wait := agreed.Sub(now)
	if wait <= 0 {
		return
	}
	until := agreed.UTC().Format(time.RFC3339Nano)
	lvl := slog.LevelInfo
	if bar.drawsBar() {
		lvl = slog.LevelDebug
	}
	bar.startsAt(agreed, "waiting for the shards' agreed start, "+until)
	logger.Log(ctx, lvl, "waiting for the shards' agreed start", "cell", p.cell, "repeat", p.index+1,
		"wait", wait.Round(time.Millisecond), "until", until, "shard_slack", c.slack)
}

// lateStartWarning is what the log says of a repeat whose schedule was
// agreed to start at agreed, started from t0 by a process that woke at
// started: nothing when it woke within lateStart. A late wake-up of this
// host (t0 is the agreed instant) leaves the schedule where it was agreed;
// only a shard that reached the agreed instant after it had passed starts
// its schedule late.
func lateStartWarning(agreed, t0, started time.Time) string {
	switch {
	case started.Sub(agreed) <= lateStart:
		return ""
	case t0.Equal(agreed):
		return "late wake-up of this host: it woke after the instant all shards agreed on for the repeat's start (a busy machine's timer); the repeat's schedule still starts at the agreed instant, so the arrivals due before it woke are sent late and their lag is counted (schedule_lag)"
	}
	return "repeat started late: this shard reached the start all shards agreed on after it had passed (an earlier repeat overran its planned length and --shard.slack, or --shard.start-at was too soon); its schedule starts when it reached it, not at the agreed instant"
}

// lateStart is how late after the agreed instant this host may wake to
// start a repeat before the log says so: an idle machine's timer wakes
// well within it, a busy one's may not (23-54 ms seen), which the warning
// words as this host's wake-up, not the schedule's.
const lateStart = 20 * time.Millisecond
