package replay

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// csvParser reads the CSV traces: Azure and BurstGPT. Columns are found by
// their header names, so extra columns and another column order are fine.
// Fields may be double-quoted; a field cannot span lines.
type csvParser struct {
	format     Format
	haveHeader bool
	// Column indexes of the timestamp, prompt and output lengths.
	ts, in, out int
	ncols       int
	fields      []string
}

// The header names of each format, compared without case and spaces.
var csvColumns = map[Format][3]string{
	FormatAzure:    {"timestamp", "contexttokens", "generatedtokens"},
	FormatBurstGPT: {"timestamp", "requesttokens", "responsetokens"},
}

func normColumn(s string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), " ", ""))
}

// maxColumns bounds the columns of a CSV header.
const maxColumns = 1024

func (p *csvParser) header(line []byte) error {
	names, err := splitCSV(string(line), nil, maxColumns+1)
	if err != nil {
		return fmt.Errorf("header: %v", err)
	}
	if len(names) > maxColumns {
		return fmt.Errorf("header %s has more than %d columns", quote(string(line)), maxColumns)
	}
	want := csvColumns[p.format]
	idx := [3]int{-1, -1, -1}
	for i, n := range names {
		n = normColumn(strings.TrimPrefix(n, "\ufeff")) // a byte order mark
		for j, w := range want {
			if n == w && idx[j] < 0 {
				idx[j] = i
			}
		}
	}
	for j, i := range idx {
		if i < 0 {
			return fmt.Errorf("header %s lacks column %q (a %s trace needs %v)", quote(string(line)), want[j], p.format, want)
		}
	}
	p.ts, p.in, p.out = idx[0], idx[1], idx[2]
	p.ncols = len(names)
	p.haveHeader = true
	return nil
}

func (p *csvParser) parse(line []byte, _ int, rec *Record) (bool, string) {
	var err error
	// One field more than the header is enough to tell a row is wrong.
	p.fields, err = splitCSV(string(line), p.fields[:0], p.ncols+1)
	if err != nil {
		return false, err.Error()
	}
	switch {
	case len(p.fields) > p.ncols:
		return false, fmt.Sprintf("more than %d fields, the header has %d", p.ncols, p.ncols)
	case len(p.fields) < p.ncols:
		return false, fmt.Sprintf("%d fields, the header has %d", len(p.fields), p.ncols)
	}
	switch p.format {
	case FormatAzure:
		t, err := parseAzureTime(p.fields[p.ts])
		if err != nil {
			return false, err.Error()
		}
		// Offsets are made relative to the first request in finish; the
		// Unix time fits a Duration until 2262.
		rec.Offset = time.Duration(t.UnixNano())
	case FormatBurstGPT:
		s, err := strconv.ParseFloat(strings.TrimSpace(p.fields[p.ts]), 64)
		off, ok := offsetOf(s, time.Second)
		if err != nil || !ok {
			return false, fmt.Sprintf("timestamp %s is not a number of seconds in [0, %.0f]", quote(p.fields[p.ts]), maxOffset.Seconds())
		}
		rec.Offset = off
	}
	if rec.InputTokens, err = tokenCount(p.fields[p.in]); err != nil {
		return false, "prompt tokens: " + err.Error()
	}
	if rec.OutputTokens, err = tokenCount(p.fields[p.out]); err != nil {
		return false, "output tokens: " + err.Error()
	}
	return true, ""
}

func tokenCount(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s is not an integer", quote(s))
	case n < 0:
		return 0, fmt.Errorf("%d is negative", n)
	case n > maxTokens:
		return 0, fmt.Errorf("%d is over the ceiling of %d tokens", n, maxTokens)
	}
	return n, nil
}

// Azure timestamps: "2023-11-16 18:17:03.9799600" (2023 traces, UTC), or
// with an offset, "2024-05-10 00:00:00.009930+00:00" (2024 traces).
var azureLayouts = []string{
	"2006-01-02 15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	time.RFC3339Nano,
}

func parseAzureTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, l := range azureLayouts {
		if t, err := time.Parse(l, s); err == nil {
			if !inTimeRange(t) {
				return time.Time{}, fmt.Errorf("timestamp %s is not between %d and %d", quote(s), minTime.Year(), maxTime.Year())
			}
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("timestamp %s is not like 2023-11-16 18:17:03.9799600", quote(s))
}

var errQuote = errors.New("unterminated quoted field")

// splitCSV splits one CSV line into fields, appending to dst, and stops
// after max fields (the rest of the line is not read). A field may be
// quoted ("a,b", with "" for a quote).
func splitCSV(line string, dst []string, max int) ([]string, error) {
	for start := len(dst); len(dst)-start < max; {
		if strings.HasPrefix(line, `"`) {
			var b strings.Builder
			i := 1
			for {
				j := strings.IndexByte(line[i:], '"')
				if j < 0 {
					return dst, errQuote
				}
				b.WriteString(line[i : i+j])
				i += j + 1
				if i < len(line) && line[i] == '"' {
					b.WriteByte('"')
					i++
					continue
				}
				break
			}
			dst = append(dst, b.String())
			line = line[i:]
			if line == "" {
				return dst, nil
			}
			if line[0] != ',' {
				return dst, errors.New("text after a quoted field")
			}
			line = line[1:]
			continue
		}
		j := strings.IndexByte(line, ',')
		if j < 0 {
			return append(dst, line), nil
		}
		dst = append(dst, line[:j])
		line = line[j+1:]
	}
	return dst, nil
}
