package bench

import (
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
)

// Output file names in the output directory.
const (
	JSONFile = "report.json"
	CSVFile  = "report.csv"
	HTMLFile = "report.html"
)

// WriteFiles writes the JSON, CSV and HTML reports into dir, creating it.
func WriteFiles(dir string, r *report.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer, *report.Report) error
	}{{JSONFile, render.WriteJSON}, {CSVFile, render.WriteCSV}, {HTMLFile, render.WriteHTML}, {render.MarkdownFile, render.WriteMarkdown}} {
		if err := writeFile(filepath.Join(dir, f.name), func(w io.Writer) error { return f.write(w, r) }); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return writeColdStartFile(dir, r)
}

// writeFile writes through a temporary file and a rename, so a reader never
// sees half a report.
func writeFile(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// medianStats is the figure-by-figure median of repeats' stats, field by
// field of Stats, by its type: a float64 is the median (0 when no repeat
// has one), an int the median rounded down; a Dist is the median of each
// of its figures over the repeats that have values (Count > 0); a bool is
// true when any repeat's is, a string (the note of a flag) the first
// repeat's that is set; Outcomes is each outcome's median count. A field
// of Stats needs nothing here (TestMedianStatsEveryField).
func medianStats(all []report.Stats) report.Stats {
	out := report.Stats{Outcomes: map[string]int{}}
	if len(all) == 0 {
		return out
	}
	col := func(f func(*report.Stats) float64) float64 {
		v := make([]float64, len(all))
		for i := range all {
			v[i] = f(&all[i])
		}
		m := median(v)
		if math.IsNaN(m) {
			return 0
		}
		return m
	}
	icol := func(f func(*report.Stats) int) int {
		return int(math.Floor(col(func(s *report.Stats) float64 { return float64(f(s)) })))
	}
	ov := reflect.ValueOf(&out).Elem()
	for i := 0; i < ov.NumField(); i++ {
		field := func(s *report.Stats) reflect.Value { return reflect.ValueOf(s).Elem().Field(i) }
		switch dst := ov.Field(i); dst.Interface().(type) {
		case float64:
			dst.SetFloat(col(func(s *report.Stats) float64 { return field(s).Float() }))
		case int:
			dst.SetInt(int64(icol(func(s *report.Stats) int { return int(field(s).Int()) })))
		case bool:
			for j := range all {
				if field(&all[j]).Bool() {
					dst.SetBool(true)
					break
				}
			}
		case string:
			for j := range all {
				if v := field(&all[j]).String(); v != "" {
					dst.SetString(v)
					break
				}
			}
		case *report.Efficiency:
			dst.Set(reflect.ValueOf(medianEfficiency(all)))
		case *report.ServerTimings:
			dst.Set(reflect.ValueOf(medianServerTimings(all)))
		case report.Dist:
			dst.Set(reflect.ValueOf(medianDist(all, func(s *report.Stats) *report.Dist { return field(s).Addr().Interface().(*report.Dist) })))
		case map[string]int:
			keys := map[string]bool{}
			for _, s := range all {
				for k := range field(&s).Interface().(map[string]int) {
					keys[k] = true
				}
			}
			if len(keys) == 0 {
				break
			}
			if dst.IsNil() {
				dst.Set(reflect.ValueOf(map[string]int{}))
			}
			m := dst.Interface().(map[string]int)
			for _, k := range slices.Sorted(maps.Keys(keys)) {
				m[k] = icol(func(s *report.Stats) int { return field(s).Interface().(map[string]int)[k] })
			}
		default:
			panic("medianStats: no rule for Stats." + ov.Type().Field(i).Name)
		}
	}
	return out
}

// medianDist is the median of each figure of one distribution over the
// repeats that have values (repeats without values, Count 0, do not vote).
func medianDist(all []report.Stats, f func(*report.Stats) *report.Dist) report.Dist {
	var have []*report.Dist
	for i := range all {
		if d := f(&all[i]); d.Count > 0 {
			have = append(have, d)
		}
	}
	if len(have) == 0 {
		return report.Dist{}
	}
	dcol := func(g func(*report.Dist) float64) float64 {
		v := make([]float64, len(have))
		for i, d := range have {
			v[i] = g(d)
		}
		return median(v)
	}
	return report.Dist{
		Count: int(math.Floor(dcol(func(d *report.Dist) float64 { return float64(d.Count) }))),
		Mean:  dcol(func(d *report.Dist) float64 { return d.Mean }),
		Min:   dcol(func(d *report.Dist) float64 { return d.Min }),
		P50:   dcol(func(d *report.Dist) float64 { return d.P50 }),
		P90:   dcol(func(d *report.Dist) float64 { return d.P90 }),
		P95:   dcol(func(d *report.Dist) float64 { return d.P95 }),
		P99:   dcol(func(d *report.Dist) float64 { return d.P99 }),
		P999:  dcol(func(d *report.Dist) float64 { return d.P999 }),
		Max:   dcol(func(d *report.Dist) float64 { return d.Max }),
	}
}
