package report

import (
	"fmt"
	"math"
	"strconv"
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
