package observation

import "iter"

// ByOutcome keeps one value per outcome of Outcomes, each made up front:
// the counter bound to an outcome's label, the attributes its requests
// are recorded with, a count. Made for every outcome before the first
// request, each outcome's series exists at zero from the first scrape
// (rate() works at once), and a request's outcome finds its own value
// without a lookup that could miss. The zero ByOutcome holds zero values.
type ByOutcome[T any] struct {
	values [len(outcomes)]T
}

// NewByOutcome makes each outcome's value with value, in Outcomes' order.
func NewByOutcome[T any](value func(Outcome) T) ByOutcome[T] {
	var b ByOutcome[T]
	for i, o := range outcomes {
		b.values[i] = value(o)
	}
	return b
}

// Of returns o's value; false for an outcome not in Outcomes.
func (b *ByOutcome[T]) Of(o Outcome) (T, bool) {
	if i := o.index(); i >= 0 {
		return b.values[i], true
	}
	var zero T
	return zero, false
}

// At returns where o's value is kept, to change it in place (a count);
// nil for an outcome not in Outcomes.
func (b *ByOutcome[T]) At(o Outcome) *T {
	if i := o.index(); i >= 0 {
		return &b.values[i]
	}
	return nil
}

// All yields every outcome and its value, in Outcomes' order.
func (b *ByOutcome[T]) All() iter.Seq2[Outcome, T] {
	return func(yield func(Outcome, T) bool) {
		for i, o := range outcomes {
			if !yield(o, b.values[i]) {
				return
			}
		}
	}
}

// index is o's place in Outcomes, or -1. Eight comparisons of short
// strings: as cheap as a map lookup, and nothing to allocate.
func (o Outcome) index() int {
	for i, x := range outcomes {
		if x == o {
			return i
		}
	}
	return -1
}
