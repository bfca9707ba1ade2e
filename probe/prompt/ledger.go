package prompt

// PrefixLedger follows the shared prefixes of the prompts actually sent,
// in the order they were sent, and says of each how many of its prefix's
// tokens an earlier sent prompt had already sent: what a prefix cache
// that holds every prefix serves it, the "best the workload allows".
// A prompt's own RepeatTokens says the same only when every prompt drawn
// before it was sent; an arrival dropped at the in-flight cap, or a
// prompt drawn and never sent, leaves a prefix's next use its first, and
// the ledger counts it a miss. The zero value is empty; not safe for
// concurrent use.
type PrefixLedger struct {
	longest map[int]int // by PrefixIndex, the longest prefix sent
}

// Sent records p as sent and returns how many of its prefix's tokens an
// earlier sent prompt sent.
func (l *PrefixLedger) Sent(p Prompt) int {
	if p.PrefixIndex == 0 || p.PrefixTokens == 0 {
		return 0
	}
	if l.longest == nil {
		l.longest = map[int]int{}
	}
	had := l.longest[p.PrefixIndex]
	l.longest[p.PrefixIndex] = max(had, p.PrefixTokens)
	return min(had, p.PrefixTokens)
}
