package render

import (
	"encoding/csv"
	"encoding/json"
	"io"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// WriteJSON writes the full report as indented JSON.
func WriteJSON(w io.Writer, r *report.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteCSV writes one row per cell, a field per column (columns.go).
func WriteCSV(w io.Writer, r *report.Report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(report.CSVHeader); err != nil {
		return err
	}
	row := make([]string, len(report.Columns))
	for i := range r.Cells {
		for j := range report.Columns {
			row[j] = report.Columns[j].CSV(&r.Cells[i])
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
