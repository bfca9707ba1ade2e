package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// IsTerminal reports whether f is a character device (a terminal), where a
// progress bar belongs; logs and pipes get none.
func IsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress follows the matrix's repeats (its units): on a terminal as a
// one-line bar redrawn in place, with the running repeat's own figures
// (elapsed of its current limit, and why that limit is not the plan; sent,
// completed, req/s and TTFT p50 so far) and an estimate of the time left
// from the planned durations; elsewhere as one plain line per repeat when
// it ends. A nil *progress says nothing.
type progress struct {
	bar   io.Writer // a terminal, or nil
	lines io.Writer // plain lines, or nil
	// plans is each unit's planned duration, in the order they run; gap
	// the time between one's planned end and the next's start (the shards'
	// slack, --shard.slack; 0 without their clock).
	plans []time.Duration
	gap   time.Duration
	start time.Time

	// columns bounds the bar's line (its terminal's width; 0: no bound).
	columns int

	mu    sync.Mutex
	done  int
	label string
	cur   *liveRepeat
	quit  chan struct{}
	wg    sync.WaitGroup
	// closeOnce ends the bar once (close).
	closeOnce sync.Once
}

// newProgress follows units of the planned durations, gap apart: a bar on
// bar, or plain lines on lines (bar wins); nil when both are nil.
func newProgress(bar, lines io.Writer, plans []time.Duration, gap time.Duration) *progress {
	if bar == nil && lines == nil {
		return nil
	}
	p := &progress{plans: plans, gap: gap, start: time.Now()}
	if bar == nil {
		p.lines = lines
		return p
	}
	p.bar, p.quit = bar, make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

// begin names the work in progress (a repeat planned to last planned, 0
// when not known) and returns the observer of its requests, for the bar's
// figures; nil without a bar.
func (p *progress) begin(label string, planned time.Duration) workload.Observer {
	if p == nil {
		return nil
	}
	var live *liveRepeat
	if p.bar != nil {
		live = &liveRepeat{start: time.Now(), planned: planned}
	}
	p.mu.Lock()
	p.label, p.cur = label, live
	p.mu.Unlock()
	if p.bar != nil {
		p.draw()
		return live
	}
	return nil
}

// say writes line on a line of its own, before the bar when there is one
// (the run's plan, said before the first repeat).
func (p *progress) say(line string) {
	if p == nil {
		return
	}
	if p.lines != nil {
		fmt.Fprintln(p.lines, line)
		return
	}
	p.mu.Lock()
	fmt.Fprintf(p.bar, "\r\033[K%s\n", line)
	p.mu.Unlock()
	p.draw()
}

// running is the repeat running now (nil: none, or no progress shown).
func (p *progress) running() *liveRepeat {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// limit says the running repeat now ends at end (its schedule's limit; the
// requests then in flight run on), and why in a few words when that is not
// its plan: a warm-up that lasts until the pipeline is full, a stability
// extension. The bar's length of the repeat, and the time left, follow it.
func (p *progress) limit(end time.Time, why string) {
	cur := p.running()
	if cur == nil {
		return
	}
	cur.mu.Lock()
	cur.length, cur.why = end.Sub(cur.start), why
	cur.mu.Unlock()
}

// startsAt says the running repeat's schedule starts at at (the shards'
// agreed start, which it waits for), its planned length after that, and
// why its length is not the plan ("" once the wait is over): the bar's
// length of the repeat, and the time left, count the wait.
func (p *progress) startsAt(at time.Time, why string) {
	cur := p.running()
	if cur == nil {
		return
	}
	cur.mu.Lock()
	if cur.planned > 0 {
		cur.length = at.Sub(cur.start) + cur.planned
	}
	cur.why = why
	cur.mu.Unlock()
}

// drawsBar says a bar is drawn: a line logged meanwhile would be glued to
// it, so what the bar says is logged at debug level.
func (p *progress) drawsBar() bool { return p != nil && p.bar != nil }

// step counts one unit done; line, when set, is its plain line.
func (p *progress) step(line string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.done++
	p.cur = nil
	p.mu.Unlock()
	if p.lines != nil && line != "" {
		fmt.Fprintln(p.lines, line)
	}
	if p.bar != nil {
		p.draw()
	}
}

// etaOf is the time left when done units have ended and the next has run
// for elapsed, its length now being length (its limit so far: its plan,
// or longer once its warm-up or the stability rule extended it, or its
// wait for the shards' agreed start; 0: its plan): what remains of that
// length (nothing once overdue, while its last requests drain) and the
// plans of the units after it, gap apart. It counts time, not units: a
// matrix of unequal cells (a long replay after short rates) is estimated
// by their durations. The units after the running one count their plan,
// not their most: most repeats are never extended, and one that is says
// so when it is.
//
// gap is the shards' slack: the next unit starts at the running one's
// agreed start plus its planned length plus the slack, so what its drain
// takes of the slack is not added to the time left, and the next start
// is no nearer for an overrun (a late start is at once).
func etaOf(plans []time.Duration, gap time.Duration, done int, length, elapsed time.Duration) time.Duration {
	if done >= len(plans) {
		return 0
	}
	if length <= 0 {
		length = plans[done]
	}
	after := plans[done+1:]
	if len(after) == 0 {
		return max(0, length-elapsed)
	}
	left := max(0, length+gap-elapsed)
	for _, d := range after {
		left += d
	}
	return left + time.Duration(len(after)-1)*gap
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	const width = 30
	total := len(p.plans)
	done := min(p.done, total)
	filled := 0
	if total > 0 {
		filled = width * done / total
	}
	var inCell, length time.Duration
	cell := ""
	if p.cur != nil {
		inCell = time.Since(p.cur.start)
		length, _ = p.cur.current()
		cell = "  " + p.cur.figures(inCell)
	}
	elapsed := time.Since(p.start).Truncate(time.Second)
	eta := etaOf(p.plans, p.gap, done, length, inCell).Truncate(time.Second)
	line := fmt.Sprintf("[%s%s] %d/%d  %s elapsed, eta %s  %s%s",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total, elapsed, eta, p.label, cell)
	fmt.Fprint(p.bar, "\r\033[K"+fitColumns(line, p.columns))
}

// fitColumns cuts line to fewer than columns characters (0: no bound),
// ending it with "…" where it was cut: the bar's head (how far, the time
// left) comes first, so what a narrow terminal loses is the running
// repeat's figures at its end. The last column stays free, where a
// terminal would wrap.
func fitColumns(line string, columns int) string {
	if columns <= 0 {
		return line
	}
	r := []rune(line)
	if len(r) < columns {
		return line
	}
	if columns < 2 {
		return ""
	}
	return string(r[:columns-2]) + "…"
}

// DefaultColumns is the width assumed of a terminal that says none.
const DefaultColumns = 80

// terminalColumns is the width of the terminal f: $COLUMNS (columns) when
// it is a positive number, else what the terminal says, else
// DefaultColumns.
func terminalColumns(columns string, f *os.File) int {
	if n, err := strconv.Atoi(strings.TrimSpace(columns)); err == nil && n > 0 {
		return n
	}
	if n := windowColumns(f); n > 0 {
		return n
	}
	return DefaultColumns
}

// close stops redrawing and ends the bar's line, once: the run closes
// it when interrupted, before anything is said of the interrupt (a line
// logged while the bar is drawn would be glued to it), and again at its
// end.
func (p *progress) close() {
	if p == nil || p.bar == nil {
		return
	}
	p.closeOnce.Do(func() {
		close(p.quit)
		p.wg.Wait()
		p.draw()
		fmt.Fprintln(p.bar)
	})
}

// progressLine is a repeat's plain line when it ends: the cell's place in
// the matrix (i of n) and its repeat when there are several, its name, and
// the repeat's own figures from its Stats (report.json's repeat): measured
// requests sent (not dropped), their successes, completions per second,
// TTFT p50, and the repeat's wall time, warm-up included, with why it was
// longer than planned when it was (longer, from longerThanPlanned).
func progressLine(i, n, repeat, repeats int, name string, st *report.Stats, wall time.Duration, longer string) string {
	rep := ""
	if repeats > 1 {
		rep = fmt.Sprintf(" repeat %d/%d", repeat, repeats)
	}
	ttft := "-"
	if st.TTFT.Count > 0 {
		ttft = fmt.Sprintf("%.0f ms", st.TTFT.P50*1000)
	}
	sent := st.Requests - st.Outcomes[string(observation.Dropped)]
	if longer != "" {
		longer = "; " + longer
	}
	return fmt.Sprintf("cell %d/%d%s %s: %d sent, %d ok, %.2f req/s, TTFT p50 %s (%.1f s%s)",
		i, n, rep, name, sent, st.Successes, st.RequestsPerSecond, ttft, wall.Seconds(), longer)
}

// longerThanPlanned says in a few words why a repeat ran longer than its
// plan: a warm-up that lasted past the configured one (until the pipeline
// was full, or cut at its bound), measured windows the stability rule
// added; "" when neither.
func longerThanPlanned(res *report.RepeatResult, warmup time.Duration) string {
	var why []string
	// A millisecond's slack: the configured warm-up read back from seconds.
	if w := time.Duration(res.WarmupSeconds * float64(time.Second)); w > warmup+time.Millisecond {
		why = append(why, fmt.Sprintf("warm-up %.1f s, not %.1f s", w.Seconds(), warmup.Seconds()))
	}
	if n := res.Stability.Extended; n > 0 {
		why = append(why, fmt.Sprintf("extended %.0f s for stability", float64(n)*res.Stability.WindowSeconds))
	}
	return strings.Join(why, ", ")
}

// liveRepeat counts the running repeat's requests for the bar, as they
// happen (warm-up included: the bar says what the server is doing now),
// and holds its current length.
type liveRepeat struct {
	start   time.Time
	planned time.Duration

	mu sync.Mutex
	// length is the repeat's limit from start once the repeat has said
	// it (0: planned), why the reason it differs from the plan.
	length    time.Duration
	why       string
	sent      int
	completed int
	ttft      []float64 // the first maxLiveTTFT, then a ring of the latest
	next      int
}

// maxLiveTTFT bounds the TTFTs the bar keeps for its p50.
const maxLiveTTFT = 4096

var _ workload.Observer = (*liveRepeat)(nil)

// Sent implements workload.Observer.
func (l *liveRepeat) Sent(*observation.Request) {
	l.mu.Lock()
	l.sent++
	l.mu.Unlock()
}

// FirstToken implements workload.Observer.
func (l *liveRepeat) FirstToken(o *observation.Request) {
	d, ok := o.TTFT()
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ttft) < maxLiveTTFT {
		l.ttft = append(l.ttft, d.Seconds())
		return
	}
	l.ttft[l.next] = d.Seconds()
	l.next = (l.next + 1) % maxLiveTTFT
}

// Token implements workload.Observer.
func (l *liveRepeat) Token(*observation.Request) {}

// Done implements workload.Observer.
func (l *liveRepeat) Done(*observation.Request) {
	l.mu.Lock()
	l.completed++
	l.mu.Unlock()
}

// Dropped implements workload.Observer.
func (l *liveRepeat) Dropped(*observation.Request) {}

// current is the repeat's length so far (0 when neither planned nor
// said) and why it differs from the plan.
func (l *liveRepeat) current() (time.Duration, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.length > 0 {
		return l.length, l.why
	}
	return l.planned, l.why
}

// figures is the bar's text for the repeat, elapsed into it.
func (l *liveRepeat) figures(elapsed time.Duration) string {
	length, why := l.current()
	l.mu.Lock()
	sent, completed := l.sent, l.completed
	ttft := slices.Clone(l.ttft)
	l.mu.Unlock()
	rate := 0.0
	if elapsed > 0 {
		rate = float64(completed) / elapsed.Seconds()
	}
	p50 := "-"
	if m := median(ttft); !math.IsNaN(m) {
		p50 = fmt.Sprintf("%.0f ms", m*1000)
	}
	return fmt.Sprintf("%s, %d sent, %d done, %.2f req/s, TTFT p50 %s", lengthText(elapsed, length, why, sent-completed), sent, completed, rate, p50)
}

// lengthText is the bar's "elapsed/length s" of a repeat, with why its
// length is not the plan, and, past its length (its schedule ended), the
// requests it still waits for: a repeat never shows more seconds than its
// length without a reason.
func lengthText(elapsed, length time.Duration, why string, inFlight int) string {
	// In whole seconds, as shown: 12.4 of 12 reads 12/12, not overdue.
	shown, of := math.Round(elapsed.Seconds()), math.Round(length.Seconds())
	plan := "?"
	if length > 0 {
		plan = fmt.Sprintf("%.0f", of)
	}
	var reasons []string
	if why != "" {
		reasons = append(reasons, why)
	}
	if length > 0 && shown > of {
		reasons = append(reasons, fmt.Sprintf("draining %d in flight", max(0, inFlight)))
	}
	text := fmt.Sprintf("%.0f/%s s", shown, plan)
	if len(reasons) > 0 {
		text += " (" + strings.Join(reasons, "; ") + ")"
	}
	return text
}

// plural is one or many by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
