package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/infer-exporter/infer_exporter/internal/ctxio"
)

// Bounds of a report read back (`bench merge`'s shards, `--baseline`,
// `bench verify`'s report).
const (
	// MaxReportBytes bounds a report file. The largest part of a legitimate
	// report is a shard's request records and inter-token gaps: at the
	// defaults (100,000 records of some 150 bytes and 1,000,000 gaps of
	// some 20 bytes per repeat) a repeat's part is about 35 MB, so 256 MiB
	// holds seven such repeats at full sampling, or a 3×3 matrix of
	// 3 repeats that kept a tenth of that each; a report beyond it is not
	// one the bench writes with its defaults, and reading it is refused
	// rather than let it take the memory of the machine that merges.
	MaxReportBytes = 256 << 20
	// MaxReportDecodedBytes bounds what decoding a report may hold: the
	// sum, over every list in the file, of its elements times the size of
	// the Go value each one decodes into (a list grows by doubling, so
	// twice that). It is counted before anything is decoded, so that a
	// small file of empty values (`{},{},…` in a list of 800-byte cells)
	// cannot make the decoder hold a hundred times its size. A report the
	// bench wrote decodes into less than its own size (a record is some
	// 150 bytes of text and 80 of Go value), so four times MaxReportBytes
	// refuses none.
	MaxReportDecodedBytes = 4 * MaxReportBytes
	// maxReportDepth bounds the nesting of a report's JSON: the bench
	// writes eight levels.
	maxReportDepth = 64
	// ReadChunk is what one read asks for: the context is checked between
	// two of them.
	ReadChunk = 1 << 20
)

// errNotRegular refuses what is not a regular file: a FIFO, a device
// (/dev/zero, /dev/urandom), a socket or a directory, which have no size
// to check and may never end.
var errNotRegular = errors.New("not a regular file")

// OpenRegular opens path for reading, refusing anything but a regular file
// of at most max bytes (max < 0: any size). The file is looked at before it
// is opened, so that opening a FIFO never waits for a writer, and again
// once open (openNoBlock: the same FIFO put in its place between the two
// still does not block), so that what is read is what was checked.
func OpenRegular(path string, max int64) (*os.File, os.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: %w (%s)", path, errNotRegular, fi.Mode().Type())
	}
	f, err := openNoBlock(path)
	if err != nil {
		return nil, nil, err
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w (%s)", path, errNotRegular, fi.Mode().Type())
	}
	if max >= 0 && fi.Size() > max {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %d bytes: larger than %d", path, fi.Size(), max)
	}
	return f, fi, nil
}

// ContextReader reads r in chunks of at most ReadChunk, ending with ctx's
// error once ctx is done: a read from a slow mount ends at the next chunk.
func ContextReader(ctx context.Context, r io.Reader) io.Reader {
	return ctxio.Reader{Ctx: ctx, R: r, Chunk: ReadChunk}
}

// readRegular reads a regular file of at most max bytes, in chunks, until
// ctx ends. A file that grows past max while it is read is refused too
// (the read goes through io.LimitReader(max+1)).
func readRegular(ctx context.Context, path string, max int64) ([]byte, error) {
	f, fi, err := OpenRegular(path, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, 0, min(fi.Size(), max)+1)
	b, err := readAllInto(buf, io.LimitReader(ContextReader(ctx, f), max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: grew past %d bytes while read", path, max)
	}
	return b, nil
}

// readAllInto is io.ReadAll into buf's capacity first.
func readAllInto(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// ReadJSON reads a report written by WriteJSON: ReadJSONContext without a
// context.
func ReadJSON(path string) (*Report, error) {
	return ReadJSONContext(context.Background(), path)
}

// ReadJSONContext reads a report written by WriteJSON: a regular file of
// at most MaxReportBytes, whose decoding holds at most
// MaxReportDecodedBytes (counted first, see decodeCost). The read ends
// when ctx does; the decoding, which cannot be stopped, runs to its end in
// the background (it is bounded) while ReadJSONContext returns ctx's error
// at once.
func ReadJSONContext(ctx context.Context, path string) (*Report, error) {
	b, err := readRegular(ctx, path, MaxReportBytes)
	if err != nil {
		return nil, err
	}
	type result struct {
		r   *Report
		err error
	}
	done := make(chan result, 1) // buffered: a decode that outlives ctx never blocks
	go func() {
		r, err := Decode(b)
		done <- result{r, err}
	}()
	select {
	case res := <-done:
		if res.err != nil {
			return nil, fmt.Errorf("%s: %w", path, res.err)
		}
		return res.r, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: not read: %w", path, ctx.Err())
	}
}

// Decode decodes a report's bytes once decodeCost has said that
// decoding them holds at most MaxReportDecodedBytes.
func Decode(b []byte) (*Report, error) {
	if err := checkDecodeCost(b, reflect.TypeFor[Report](), MaxReportDecodedBytes); err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("schema %q, want %q", r.Schema, Schema)
	}
	notCheckedUnflagged(&r)
	successRatioFilled(&r)
	return &r, nil
}

// successRatioFilled gives a report written before Stats.SuccessRatio its
// success ratios: each repeat's Successes / Requests, and the cell's, the
// median over its repeats (as the bench's summary takes it), so that its
// outputs show them rather than 0. Such a report is known by a ratio of 0
// beside successes; its intervals are not made up (a baseline without the
// success ratio's interval leaves that figure inconclusive).
func successRatioFilled(r *Report) {
	for i := range r.Cells {
		c := &r.Cells[i]
		var ratios []float64
		for j := range c.Repeats {
			s := &c.Repeats[j].Stats
			if s.SuccessRatio == 0 && s.Successes > 0 && s.Requests > 0 {
				s.SuccessRatio = float64(s.Successes) / float64(s.Requests)
			}
			ratios = append(ratios, s.SuccessRatio)
		}
		if s := &c.Summary; s.SuccessRatio == 0 && s.Successes > 0 && len(ratios) > 0 {
			slices.Sort(ratios)
			m := len(ratios) / 2
			s.SuccessRatio = ratios[m]
			if len(ratios)%2 == 0 {
				s.SuccessRatio = (ratios[m-1] + ratios[m]) / 2
			}
		}
	}
}

// notCheckedUnflagged drops the stable flag of what was not checked: a
// report written before the flag was left out then said "stable": true
// of a cell none of whose repeats was checked (false of such a repeat).
func notCheckedUnflagged(r *Report) {
	for i := range r.Cells {
		c := &r.Cells[i]
		if !c.StabilityChecked() {
			c.Stable = nil
		}
		for j := range c.Repeats {
			if !c.Repeats[j].Stability.Checked {
				c.Repeats[j].Stability.Stable = nil
			}
		}
	}
}

// checkDecodeCost walks the JSON in b along the Go type t, as
// encoding/json would decode it (field names matched as json matches
// them, unknown fields skipped), and adds up what decoding would allocate
// for lists and maps: twice the element's size per element of a slice,
// mapEntryBytes plus the value's size per entry of a map. It refuses b
// once that passes limit, or when b nests deeper than maxReportDepth. It
// allocates nothing per value, so it is safe on any input; b that is not
// JSON is left to json.Unmarshal to refuse.
func checkDecodeCost(b []byte, t reflect.Type, limit int64) error {
	s := costScanner{b: b, limit: limit, fields: map[reflect.Type]map[string]reflect.Type{}}
	s.skipSpace()
	if err := s.value(t, 0); err != nil {
		return err
	}
	return nil
}

// mapEntryBytes is a map entry's overhead beside its value: its key's
// string header and bucket share.
const mapEntryBytes = 48

type costScanner struct {
	b     []byte
	i     int
	cost  int64
	limit int64
	// fields caches jsonFields per struct type: a report's types are few.
	fields map[reflect.Type]map[string]reflect.Type
}

var errSyntax = errors.New("not JSON") // json.Unmarshal says where

func (s *costScanner) skipSpace() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *costScanner) add(n int64) error {
	s.cost += n
	if s.cost > s.limit {
		return fmt.Errorf("decoding it would hold more than %d bytes (report.MaxReportDecodedBytes): lists of far more values than a report of its size holds", s.limit)
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// value scans one JSON value that decodes into t (nil: skipped by the
// decoder, so free).
func (s *costScanner) value(t reflect.Type, depth int) error {
	if depth > maxReportDepth {
		return fmt.Errorf("nested deeper than %d levels", maxReportDepth)
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && reflect.PointerTo(t).Implements(unmarshalerType) {
		// Its own decoder gets the value's bytes (Num, time.Time): it
		// holds no more than a scalar.
		t = nil
	}
	if s.i >= len(s.b) {
		return errSyntax
	}
	switch s.b[s.i] {
	case '{':
		return s.object(t, depth)
	case '[':
		return s.array(t, depth)
	case '"':
		return s.str()
	default:
		for s.i < len(s.b) && !strings.ContainsRune(",]} \t\r\n", rune(s.b[s.i])) {
			s.i++
		}
		return nil
	}
}

func (s *costScanner) str() error {
	s.i++ // the opening quote
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
			continue
		case '"':
			s.i++
			return nil
		}
		s.i++
	}
	return errSyntax
}

func (s *costScanner) array(t reflect.Type, depth int) error {
	s.i++
	var elem reflect.Type
	var per int64
	switch {
	case t == nil:
	case t.Kind() == reflect.Slice:
		elem, per = t.Elem(), 2*int64(t.Elem().Size())
	case t.Kind() == reflect.Array:
		elem = t.Elem()
	case t.Kind() == reflect.Interface:
		elem, per = t, 2*16
	}
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		if err := s.add(per); err != nil {
			return err
		}
		s.skipSpace()
		if err := s.value(elem, depth+1); err != nil {
			return err
		}
		if done, err := s.separator(']'); done || err != nil {
			return err
		}
	}
}

func (s *costScanner) object(t reflect.Type, depth int) error {
	s.i++
	var fields map[string]reflect.Type
	var mapElem reflect.Type
	var perEntry int64
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct:
		if fields = s.fields[t]; fields == nil {
			fields = jsonFields(t)
			s.fields[t] = fields
		}
	case t.Kind() == reflect.Map:
		mapElem, perEntry = t.Elem(), mapEntryBytes+int64(t.Elem().Size())
	case t.Kind() == reflect.Interface:
		mapElem, perEntry = t, mapEntryBytes+16
	}
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		s.skipSpace()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return errSyntax
		}
		from := s.i + 1
		if err := s.str(); err != nil {
			return err
		}
		key := string(s.b[from : s.i-1])
		s.skipSpace()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return errSyntax
		}
		s.i++
		s.skipSpace()
		var vt reflect.Type
		switch {
		case fields != nil:
			vt = lookupField(fields, key)
		case mapElem != nil:
			if err := s.add(perEntry + int64(len(key))); err != nil {
				return err
			}
			vt = mapElem
		}
		if err := s.value(vt, depth+1); err != nil {
			return err
		}
		if done, err := s.separator('}'); done || err != nil {
			return err
		}
	}
}

// lookupField finds a JSON key among a struct's fields as encoding/json
// does: the exact name first, else one equal under case folding. An
// escaped key (rare, never written by the bench) is looked up as written;
// what it misses costs at most the value's own bytes, which the file's
// bound covers for scalars, and nothing for lists and maps left unknown.
func lookupField(fields map[string]reflect.Type, key string) reflect.Type {
	if t, ok := fields[key]; ok {
		return t
	}
	for name, t := range fields {
		if strings.EqualFold(name, key) {
			return t
		}
	}
	return nil
}

// jsonFields maps a struct's JSON field names to their types, promoted
// fields of embedded structs included, as encoding/json names them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	var walk func(reflect.Type, int)
	walk = func(t reflect.Type, depth int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			ft := f.Type
			if f.Anonymous && name == "" {
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct && depth < 8 {
					walk(ft, depth+1)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := m[name]; !dup {
				m[name] = f.Type
			}
		}
	}
	walk(t, 0)
	return m
}

// separator reads what follows an element of a list or an object: a comma
// (more follow) or its closing byte (done).
func (s *costScanner) separator(closing byte) (bool, error) {
	s.skipSpace()
	if s.i >= len(s.b) {
		return false, errSyntax
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		return false, nil
	case closing:
		s.i++
		return true, nil
	}
	return false, errSyntax
}
