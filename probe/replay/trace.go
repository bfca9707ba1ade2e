package replay

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Format names a trace format.
type Format string

// The formats Read understands.
const (
	// FormatJSONL is our own recorded-request format, written by the shadow
	// proxy (see CapturedRequest).
	FormatJSONL Format = "jsonl"
	// FormatAzure is the Azure LLM inference trace CSV:
	// TIMESTAMP,ContextTokens,GeneratedTokens.
	FormatAzure Format = "azure"
	// FormatMooncake is the Mooncake trace JSONL: timestamp (ms),
	// input_length, output_length, hash_ids.
	FormatMooncake Format = "mooncake"
	// FormatBurstGPT is the BurstGPT CSV: Timestamp (s), Request tokens,
	// Response tokens, among other columns.
	FormatBurstGPT Format = "burstgpt"
)

// Formats lists every format, for help texts and validation.
func Formats() []Format {
	return []Format{FormatJSONL, FormatAzure, FormatMooncake, FormatBurstGPT}
}

// ParseFormat returns the format with the given name.
func ParseFormat(name string) (Format, error) {
	for _, f := range Formats() {
		if string(f) == name {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown trace format %q (known: %v)", name, Formats())
}

// Policy says what happens to a malformed line, or to a record that cannot be
// replayed exactly.
type Policy string

const (
	// Refuse fails the whole read (or the source) at the first bad line.
	Refuse Policy = "refuse"
	// Skip drops the line, counts it and keeps its error for the log.
	Skip Policy = "skip"
)

// ParsePolicy returns the policy with the given name; "" is Refuse.
func ParsePolicy(name string) (Policy, error) {
	switch Policy(name) {
	case "", Refuse:
		return Refuse, nil
	case Skip:
		return Skip, nil
	}
	return "", fmt.Errorf("unknown malformed-line policy %q (known: refuse, skip)", name)
}

// Record is one request of a trace.
type Record struct {
	// Offset is the request's instant from the trace's first request.
	Offset time.Duration
	// InputTokens and OutputTokens are the prompt and output lengths in
	// tokens; 0 where the trace does not say (a recorded body carries its own
	// prompt; its OutputTokens is the observed output length, if recorded).
	InputTokens  int
	OutputTokens int
	// HashIDs are Mooncake's prefix-block ids: equal ids at the same position
	// mean an equal prefix up to the end of that block.
	HashIDs []int64
	// Body is the request body as it was sent (FormatJSONL only).
	Body json.RawMessage
	// Path is the API path the body was sent to, when the trace says
	// ("/v1/chat/completions").
	Path string
	// File and Line locate the record, for error messages; Line is 1-based
	// and counts the header.
	File string
	Line int
}

// Trace is a whole trace in memory, its records sorted by offset (the order
// of the file among equal offsets).
type Trace struct {
	Name    string // the path that was read
	Format  Format
	Records []Record
	// Skipped counts the malformed lines dropped under the Skip policy.
	Skipped int
	// Errors holds the errors of the first MaxKeptErrors skipped lines, each
	// a *LineError.
	Errors []error
}

// MaxKeptErrors bounds Trace.Errors and Source.Errors.
const MaxKeptErrors = 20

// LineError is a malformed line, or a record that cannot be replayed, with
// its place in the file.
type LineError struct {
	File   string
	Line   int
	Reason string
}

func (e *LineError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
}

// ReadOptions configure Read.
type ReadOptions struct {
	// OnMalformed is what to do with a malformed line; "" is Refuse.
	OnMalformed Policy
	// MaxLineBytes bounds one line (a longer line is malformed). Default
	// DefaultMaxLineBytes.
	MaxLineBytes int
	// MaxRecords bounds the records of a trace (all its files together):
	// a trace with more is refused, whatever OnMalformed says. Default
	// DefaultMaxRecords.
	MaxRecords int
}

// DefaultMaxLineBytes is the default bound on one trace line: a recorded
// request of a 128k-token prompt fits with room to spare.
const DefaultMaxLineBytes = 16 << 20

// DefaultMaxRecords is the default bound on the records of a trace. A
// record takes about 120 bytes in memory (plus its body, for FormatJSONL),
// and the Source copies the window's records: at the bound a trace holds
// about 1.2 GB before its window is cut. The public traces the tests use
// are far smaller (the Azure 2023 code trace holds 8,818 requests, the
// Mooncake FAST'25 synthetic trace 3,993).
const DefaultMaxRecords = 10_000_000

// maxTokens bounds a token count read from a trace (a prompt or output
// length): 1<<20, matching config.MaxTokens, the ceiling on the lengths a
// configuration may ask for (not imported: the two are kept equal by hand).
// A synthesised prompt is at most this many words, so that a trace row
// cannot make the replay build an arbitrarily large one.
const maxTokens = 1 << 20

// Absolute times (the Azure trace's, FormatJSONL's "time") must lie in
// [minTime, maxTime): their Unix nanoseconds fit an int64, and so does the
// span between any two of them.
var (
	minTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// maxOffset bounds a relative timestamp (BurstGPT's seconds, Mooncake's
// milliseconds, FormatJSONL's "offset"): 100 years, so that the offset in
// nanoseconds fits an int64 with room for the Source's arithmetic.
const maxOffset = 100 * 365 * 24 * time.Hour

// offsetOf converts a relative timestamp, v units of unit, to a Duration,
// or says false when it is not a finite number in [0, maxOffset].
func offsetOf(v float64, unit time.Duration) (time.Duration, bool) {
	if math.IsNaN(v) || v < 0 || v > float64(maxOffset/unit) {
		return 0, false // NaN, negative, or too large (+Inf included)
	}
	return time.Duration(math.Round(v * float64(unit))), true
}

// inTimeRange says whether an absolute time is in [minTime, maxTime).
func inTimeRange(t time.Time) bool {
	return !t.Before(minTime) && t.Before(maxTime)
}

// ErrCROnly is the error of a file whose lines end in a bare CR ("\r", as
// on classic Mac OS): read as \n-separated lines it is a single line.
var ErrCROnly = errors.New(`CR-only line endings (\r): save the file with \n or \r\n line endings`)

// utf8BOM is the UTF-8 byte order mark, which some editors put at the start
// of a file; every reader ignores it there.
var utf8BOM = []byte("\ufeff")

// maxQuoted bounds the input an error message quotes, in bytes of the
// quoted text; maxReason bounds a whole reason.
const (
	maxQuoted = 200
	maxReason = 512
)

// quote quotes s for an error message (as %q does), keeping at most about
// maxQuoted bytes: a longer s is cut at a character boundary and followed
// by an ellipsis and its length.
func quote(s string) string {
	if len(s) <= maxQuoted {
		if q := strconv.Quote(s); len(q) <= maxQuoted+2 {
			return q
		}
	}
	var q string
	cut := min(len(s), maxQuoted)
	for {
		cut = runeCut(s, cut)
		if q = strconv.Quote(s[:cut]); len(q) <= maxQuoted+2 || cut == 0 {
			break
		}
		cut = cut * 3 / 4
	}
	return fmt.Sprintf("%s… (%d bytes)", q, len(s))
}

// runeCut moves a cut of s at byte n (0 <= n <= len(s)) back to the start
// of the character it falls in, if it falls in one (at most
// utf8.UTFMax-1 bytes back; invalid UTF-8 is cut where it is).
func runeCut(s string, n int) int {
	for i := n; i > 0 && i > n-utf8.UTFMax && i < len(s); i-- {
		if utf8.RuneStart(s[i]) {
			return i
		}
	}
	return n
}

// clip bounds text that is not quoted (a number as written, a library's
// message that may repeat its input) to max bytes, marking a cut the way
// quote does.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := runeCut(s, max)
	return fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(s[:cut], "\ufffd"), len(s))
}

// ReadFile reads a trace. For FormatJSONL, path may also be a directory (a
// shadow store): its *.jsonl files are read in name order, as one trace.
func ReadFile(path string, format Format, opts ReadOptions) (*Trace, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if fi.IsDir() {
		if format != FormatJSONL {
			return nil, fmt.Errorf("%s is a directory; only format %q reads a directory", path, FormatJSONL)
		}
		files, err = filepath.Glob(filepath.Join(path, "*.jsonl"))
		if err != nil {
			return nil, err
		}
		sort.Strings(files)
	}
	rd := newReader(path, format, opts)
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		err = rd.read(f, name)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return rd.finish(), nil
}

// Read reads a trace from r; name is the file name used in errors.
func Read(r io.Reader, name string, format Format, opts ReadOptions) (*Trace, error) {
	rd := newReader(name, format, opts)
	if err := rd.read(r, name); err != nil {
		return nil, err
	}
	return rd.finish(), nil
}

// reader accumulates the records of one trace across its files.
type reader struct {
	trace      Trace
	policy     Policy
	max        int
	maxRecords int
	// times holds, for FormatJSONL records stamped with an absolute time,
	// their Unix nanoseconds; offsets are made relative to the earliest
	// record once every file is read.
	abs       []int64
	jsonlMode jsonlMode
}

func newReader(name string, format Format, opts ReadOptions) *reader {
	p := opts.OnMalformed
	if p == "" {
		p = Refuse
	}
	m := opts.MaxLineBytes
	if m <= 0 {
		m = DefaultMaxLineBytes
	}
	n := opts.MaxRecords
	if n <= 0 {
		n = DefaultMaxRecords
	}
	return &reader{trace: Trace{Name: name, Format: format}, policy: p, max: m, maxRecords: n}
}

// bad handles a malformed line: the error under Refuse, nil (and counted)
// under Skip.
func (rd *reader) bad(file string, line int, format string, args ...any) error {
	err := &LineError{File: file, Line: line, Reason: clip(fmt.Sprintf(format, args...), maxReason)}
	if rd.policy == Refuse {
		return err
	}
	rd.trace.Skipped++
	if len(rd.trace.Errors) < MaxKeptErrors {
		rd.trace.Errors = append(rd.trace.Errors, err)
	}
	return nil
}

// lineParser parses one line (without its end of line) into a record, or
// says why it is malformed. header is true for the first line of a file.
type lineParser interface {
	parse(line []byte, lineNo int, rec *Record) (ok bool, reason string)
}

func (rd *reader) read(r io.Reader, file string) error {
	var p lineParser
	switch rd.trace.Format {
	case FormatJSONL:
		p = &jsonlParser{mode: &rd.jsonlMode}
	case FormatAzure:
		p = &csvParser{format: FormatAzure}
	case FormatMooncake:
		p = &mooncakeParser{}
	case FormatBurstGPT:
		p = &csvParser{format: FormatBurstGPT}
	default:
		return fmt.Errorf("unknown trace format %q", rd.trace.Format)
	}
	lines := newLineReader(r, rd.max)
	for {
		line, n, err := lines.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", file, n, err)
		}
		if n == 1 {
			line = bytes.TrimPrefix(line, utf8BOM)
		}
		// A bare CR inside the first line, where that line cannot be read
		// as it is (a CSV header never can), means the file's lines end in
		// CR alone: the whole file is one line, and saying so beats
		// quoting it. (JSON allows a CR between tokens.)
		crOnly := n == 1 && lines.strayCR
		csv, isCSV := p.(*csvParser)
		if lines.tooLong {
			if crOnly {
				return fmt.Errorf("%s: %w", file, ErrCROnly)
			}
			if isCSV && !csv.haveHeader {
				return &LineError{File: file, Line: n, Reason: fmt.Sprintf("header line longer than %d bytes", rd.max)}
			}
			if err := rd.bad(file, n, "line longer than %d bytes", rd.max); err != nil {
				return err
			}
			continue
		}
		if isCSV && !csv.haveHeader {
			// A missing or wrong header is the file's fault, not a line's:
			// nothing after it can be read, so it is refused whatever the
			// policy. A header holding a bare CR is the whole file (its
			// columns may even be all there, the rows glued to the last).
			if crOnly {
				return fmt.Errorf("%s: %w", file, ErrCROnly)
			}
			if err := csv.header(line); err != nil {
				return &LineError{File: file, Line: n, Reason: clip(err.Error(), maxReason)}
			}
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue // blank lines (a trailing newline, spacing) are not records
		}
		rec := Record{File: file, Line: n}
		ok, reason := p.parse(line, n, &rec)
		if !ok {
			if crOnly {
				return fmt.Errorf("%s: %w", file, ErrCROnly)
			}
			if lines.strayCR {
				reason += ` (the line holds a bare CR, \r: mixed line endings?)`
			}
			if err := rd.bad(file, n, "%s", reason); err != nil {
				return err
			}
			continue
		}
		if len(rd.trace.Records) >= rd.maxRecords {
			// Like a bad header, the file's fault: refused whatever the
			// policy.
			return &LineError{File: file, Line: n, Reason: fmt.Sprintf("more than %d records: cut the trace to the part that is replayed", rd.maxRecords)}
		}
		if jp, ok := p.(*jsonlParser); ok {
			rd.abs = append(rd.abs, jp.lastAbs)
		}
		rd.trace.Records = append(rd.trace.Records, rec)
	}
	return nil
}

// finish makes offsets relative to the first request and sorts the records.
// Traces are usually sorted already; a shadow store, whose samples are
// written when their requests end, is not.
func (rd *reader) finish() *Trace {
	recs := rd.trace.Records
	if len(recs) > 0 {
		if rd.abs != nil {
			// Own JSONL: a record carries either an absolute time (abs != noAbs)
			// or an offset. Absolute times are made relative to the earliest.
			first := int64(0)
			have := false
			for _, a := range rd.abs {
				if a != noAbs && (!have || a < first) {
					first, have = a, true
				}
			}
			for i := range recs {
				if rd.abs[i] != noAbs {
					recs[i].Offset = time.Duration(rd.abs[i] - first)
				}
			}
		}
		minOff := recs[0].Offset
		for _, r := range recs {
			minOff = min(minOff, r.Offset)
		}
		for i := range recs {
			recs[i].Offset -= minOff
		}
		slices.SortStableFunc(recs, func(a, b Record) int { return cmp.Compare(a.Offset, b.Offset) })
	}
	return &rd.trace
}

// lineReader splits a stream into lines of bounded length, numbering them.
type lineReader struct {
	br   *bufio.Reader
	max  int
	n    int
	line []byte
	// tooLong says the last line was longer than max (its bytes were
	// dropped); strayCR says it held a CR followed by another byte, a CR
	// that does not end the line.
	tooLong, strayCR bool
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its "\n" or "\r\n" and its 1-based
// number; tooLong and strayCR describe it. err is io.EOF after the last
// line.
func (l *lineReader) next() (line []byte, n int, err error) {
	l.line = l.line[:0]
	l.tooLong, l.strayCR = false, false
	pendingCR := false // the previous fragment ended in a CR
	for {
		frag, isPrefix, err := l.br.ReadLine()
		if err != nil {
			if err == io.EOF && (len(l.line) > 0 || l.tooLong) {
				break
			}
			return nil, l.n + 1, err
		}
		if !l.strayCR {
			body := bytes.TrimRight(frag, "\r")
			l.strayCR = bytes.IndexByte(body, '\r') >= 0 || pendingCR && len(body) > 0
			pendingCR = len(body) < len(frag) || pendingCR && len(frag) == 0
		}
		if !l.tooLong {
			if len(l.line)+len(frag) > l.max {
				l.tooLong = true
				l.line = l.line[:0]
			} else {
				l.line = append(l.line, frag...)
			}
		}
		if !isPrefix {
			break
		}
	}
	l.n++
	return l.line, l.n, nil
}

// errNotObject is the reason for a JSON line that is not an object.
var errNotObject = errors.New("not a JSON object")

// decodeStrict decodes one JSON object into v, refusing unknown fields and
// trailing data.
func decodeStrict(line []byte, v any) error {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return errNotObject
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if rest := bytes.TrimSpace(line[dec.InputOffset():]); len(rest) > 0 {
		return errors.New("data after the JSON object")
	}
	return nil
}

// jsonErrorReason shortens encoding/json's messages for a line error. They
// may repeat the input (an unknown field's name, a number's text), so they
// are clipped.
func jsonErrorReason(err error) string {
	return clip(strings.TrimPrefix(err.Error(), "json: "), maxReason)
}
