package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// FormatSeconds shows a duration in seconds at a readable scale.
func FormatSeconds(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "—"
	case a == 0:
		return "0"
	case a < 1e-3:
		return fmt.Sprintf("%.1f µs", v*1e6)
	case a < 1:
		return fmt.Sprintf("%.2f ms", v*1e3)
	default:
		return fmt.Sprintf("%.3f s", v)
	}
}

// FormatNumber shows a plain figure with up to 4 significant decimals.
func FormatNumber(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	a := math.Abs(v)
	switch {
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

// FormatRatio shows a ratio 0..1 as a percentage.
func FormatRatio(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", v*100)
}

// FormatBytes shows bytes in GiB or MiB.
func FormatBytes(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v >= 1<<30:
		return fmt.Sprintf("%.2f GiB", v/(1<<30))
	default:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
}

// FormatFloat writes a float exactly as JSON does (shortest round-trip form).
func FormatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// The Markdown report's number formats; its test reads the numbers back
// through the same ones.
func MarkdownMillis(sec float64) string {
	if math.IsNaN(sec) {
		return "–"
	}
	return strconv.FormatFloat(sec*1000, 'f', 1, 64)
}

func MarkdownRate(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func MarkdownRatio(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// MarkdownCell escapes what would break a table cell.
func MarkdownCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// QuantileNeeds is the number of samples a quantile needs to be more than
// the largest of them: the p-quantile of n values is interpolated towards
// the maximum once n < 1/(1-p) (p99 needs 100, p99.9 1000).
func QuantileNeeds(q string) int {
	switch q {
	case "p90":
		return 10
	case "p95":
		return 20
	case "p99":
		return 100
	case "p99_9":
		return 1000
	}
	return 0
}

// QuantileLabel is a quantile's name as the tables head it.
func QuantileLabel(q string) string {
	if q == "p99_9" {
		return "p99.9"
	}
	return q
}

// ThinQuantile says, for a quantile drawn from fewer samples than it needs,
// by how many; "" otherwise.
func ThinQuantile(q string, count int) string {
	if need := QuantileNeeds(q); count > 0 && count < need {
		return fmt.Sprintf("from %d samples: %s needs at least %d", count, QuantileLabel(q), need)
	}
	return ""
}
