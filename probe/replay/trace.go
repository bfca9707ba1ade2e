package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
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
}

// DefaultMaxLineBytes is the default bound on one trace line: a recorded
// request of a 128k-token prompt fits with room to spare.
const DefaultMaxLineBytes = 16 << 20

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
	trace  Trace
	policy Policy
	max    int
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
	return &reader{trace: Trace{Name: name, Format: format}, policy: p, max: m}
}

// bad handles a malformed line: the error under Refuse, nil (and counted)
// under Skip.
func (rd *reader) bad(file string, line int, format string, args ...any) error {
	err := &LineError{File: file, Line: line, Reason: fmt.Sprintf(format, args...)}
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
		line, n, tooLong, err := lines.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", file, n, err)
		}
		if tooLong {
			if err := rd.bad(file, n, "line longer than %d bytes", rd.max); err != nil {
				return err
			}
			continue
		}
		if csv, ok := p.(*csvParser); ok && !csv.haveHeader {
			// A missing or wrong header is the file's fault, not a line's:
			// nothing after it can be read, so it is refused whatever the
			// policy.
			if err := csv.header(line); err != nil {
				return &LineError{File: file, Line: n, Reason: err.Error()}
			}
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue // blank lines (a trailing newline, spacing) are not records
		}
		rec := Record{File: file, Line: n}
		ok, reason := p.parse(line, n, &rec)
		if !ok {
			if err := rd.bad(file, n, "%s", reason); err != nil {
				return err
			}
			continue
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
		slices.SortStableFunc(recs, func(a, b Record) int {
			switch {
			case a.Offset < b.Offset:
				return -1
			case a.Offset > b.Offset:
				return 1
			}
			return 0
		})
	}
	return &rd.trace
}

// lineReader splits a stream into lines of bounded length, numbering them.
type lineReader struct {
	br   *bufio.Reader
	max  int
	n    int
	line []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its "\n" or "\r\n", its 1-based
// number, and whether it was longer than the bound (its bytes are then
// dropped). err is io.EOF after the last line.
func (l *lineReader) next() (line []byte, n int, tooLong bool, err error) {
	l.line = l.line[:0]
	for {
		frag, isPrefix, err := l.br.ReadLine()
		if err != nil {
			if err == io.EOF && (len(l.line) > 0 || tooLong) {
				break
			}
			return nil, l.n + 1, false, err
		}
		if !tooLong {
			if len(l.line)+len(frag) > l.max {
				tooLong = true
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
	return l.line, l.n, tooLong, nil
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

// jsonErrorReason shortens encoding/json's messages for a line error.
func jsonErrorReason(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}
