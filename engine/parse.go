package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/infer-exporter/infer_exporter/internal/ctxio"
)

// This file reads a target's metrics body. The mapping reads about fifty
// families (engines.go's sources and process_start_time_seconds), but a
// body may hold 16 MiB of others: an engine with many adapters, or a
// metrics.url pointed at another exporter. expfmt's parser builds an object
// for every series of every family (a 16 MiB body of a million series took
// some 570 MB of heap, and 1.6 million one-sample families 960 MB and 6 s),
// so the body is read as a stream, one line at a time, and only the lines
// of the families the mapping reads reach the parser. The others cost no
// allocation: their names are read in place, and their prefixes are noted
// for detectEngine's question, which is all that is asked of them.
//
// A line's family is told by the parser's own rules (readTokenAsMetricName
// and friends in expfmt's text_parse.go, mirrored below), so that what is
// kept is parsed exactly as before. Lines of dropped families are checked
// for the parser's syntax errors (names, labels and their escapes, the
// value, the timestamp), and one that the parser would refuse is handed to
// it, so a body that is not the text format (an HTML page, "Not Found")
// still fails the scrape. What needs a family's state (a second TYPE line,
// a histogram's le label, a repeated label name) is not checked for
// families that are dropped: those are never exposed.

const (
	// maxSeriesPerFamily bounds the series of one kept family. An engine's
	// scheduler state is a few series per model, rank or engine index (tens,
	// hundreds for a large Triton model repository); thousands are a label
	// explosion, not state, and each kept series costs some hundreds of
	// bytes of objects.
	maxSeriesPerFamily = 4096
	// maxKeptBytes bounds the text handed to the parser: about ten
	// thousand series of the mapped families, far beyond any engine's, so
	// that a body of mapped names with long labels cannot cost more than
	// some tens of MB of objects either.
	maxKeptBytes = 2 << 20
	// ctxCheckLines is how many lines are read between two looks at the
	// scrape's context, so that the scrape timeout bounds the read however
	// fast the body arrives.
	ctxCheckLines = 4096
	// readBufferBytes is the line reader's buffer; a longer line is read in
	// pieces and told by its first piece.
	readBufferBytes = 64 << 10
	// maxNameBytes is the longest name kept while reading a line: longer
	// than any wanted name with a histogram suffix, so a longer one is
	// known not to be wanted.
	maxNameBytes = 128
)

// errRefused marks a body refused for its shape (too many series,
// duplicates), not its syntax: the target's up is 0 and the reason is
// logged.
var errRefused = errors.New("scrape refused")

// wanted is the families the mapping reads: every engine's sources (the
// engine is detected from the same body, so all engines' are kept) and
// process_start_time_seconds. Where a wanted name ends as a histogram's or
// summary's part does (_count, _sum, _bucket), its base is wanted too: the
// parser puts such a sample into the base family when that is a histogram
// or summary, so the base's lines decide where the wanted one's go.
// Built once from the tables; never written after.
var wanted = func() map[string]int {
	w := map[string]int{}
	add := func(n string) {
		if _, ok := w[n]; !ok {
			w[n] = len(w)
		}
	}
	for _, m := range engineMappings {
		for _, f := range engineFamilies(m.name) {
			add(f)
		}
	}
	add("process_start_time_seconds")
	for _, n := range sortedKeys(w) {
		if b := histogramBase(n); b != n {
			add(b)
		}
	}
	return w
}()

// sortedKeys returns the keys of w, sorted, so that the table is built the
// same on every run.
func sortedKeys(w map[string]int) []string {
	out := make([]string, 0, len(w))
	for n := range w {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// histogramBase strips a histogram's or summary's suffix, as the parser's
// histogramMetricName does.
func histogramBase(n string) string {
	for _, s := range []string{"_count", "_sum", "_bucket"} {
		if len(n) > len(s) && strings.HasSuffix(n, s) {
			return n[:len(n)-len(s)]
		}
	}
	return n
}

// wantedIndex is the index of the wanted family a line of name n goes to,
// or -1. The lookup does not allocate.
func wantedIndex(n []byte) int {
	if i, ok := wanted[string(n)]; ok {
		return i
	}
	for _, s := range []string{"_count", "_sum", "_bucket"} {
		if len(n) > len(s) && string(n[len(n)-len(s):]) == s {
			if i, ok := wanted[string(n[:len(n)-len(s)])]; ok {
				return i
			}
			return -1
		}
	}
	return -1
}

// parsedMetrics is one metrics body, read.
type parsedMetrics struct {
	// fams holds the wanted families the body has, as expfmt parses them.
	fams map[string]*dto.MetricFamily
	// engine is detectEngine's answer for the whole body, dropped
	// families included; "" when no engine's names are in it.
	engine string
	// samples is the number of sample lines read, kept or not.
	samples int
	// keptLines is the line number in the body of each line handed to the
	// parser, to tell a parse error's line as the body numbers it.
	keptLines []int
}

// parseMetricsBody reads a text-format metrics body of at most
// maxMetricsBytes from r. A body whose last line lacks its newline (some
// recordings, some servers) is accepted: the line is complete, only the
// terminator is missing. ctx bounds the read.
func parseMetricsBody(ctx context.Context, r io.Reader) (*parsedMetrics, error) {
	b := bodyReader{
		out:      &parsedMetrics{},
		series:   make([]int, len(wanted)),
		prefixes: make([]bool, len(enginePrefixes)),
	}
	if err := b.read(ctx, r); err != nil {
		return nil, err
	}
	b.out.engine = detectedEngine(b.prefixes)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A cap passed is the reason, before any parse: the kept text stops
	// where the cap was passed, mid-line for a long one, and its parse
	// would only say "unexpected end of input stream".
	if b.over != nil {
		return nil, b.over
	}
	fams, err := b.parseKept(ctx)
	if err != nil {
		return nil, err
	}
	b.out.fams = fams
	return b.out, nil
}

// bodyReader is one body's read: the text of the wanted families, kept for
// the parser, and what the lines of every family tell on the way.
type bodyReader struct {
	out      *parsedMetrics
	kept     bytes.Buffer
	series   []int  // sample lines of each wanted family, by wantedIndex
	prefixes []bool // the engine prefixes seen (notePrefixes)
	lx       lexer
	line     int   // the current line's number in the body
	over     error // a cap passed: refused once the kept text is parsed
	// keepRest says whether the further pieces of a line longer than the
	// buffer are kept, as its first piece was.
	keepRest bool
}

// read reads r's lines to its end, keeping those of the wanted families.
func (b *bodyReader) read(ctx context.Context, r io.Reader) error {
	br := bufio.NewReaderSize(io.LimitReader(r, maxMetricsBytes+1), readBufferBytes)
	read, inLine := 0, false
	for {
		p, err := br.ReadSlice('\n')
		read += len(p)
		if read > maxMetricsBytes {
			return fmt.Errorf("body longer than %d bytes", maxMetricsBytes)
		}
		complete := err == nil || (err == io.EOF && len(p) > 0)
		if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
			return err
		}
		if len(p) > 0 {
			if inLine { // a further piece of a long line
				if b.keepRest {
					b.keep(p, false)
				}
			} else if lineErr := b.startLine(ctx, p, complete); lineErr != nil {
				return lineErr
			}
			inLine = err == bufio.ErrBufferFull
			if !inLine && p[len(p)-1] != '\n' && b.keepRest {
				b.keep([]byte{'\n'}, false) // the last line's missing newline
			}
		}
		if err == io.EOF {
			if len(p) == 0 && inLine && b.keepRest {
				b.keep([]byte{'\n'}, false)
			}
			return nil
		}
	}
}

// startLine reads a line's first piece p (the whole line, unless it is
// longer than the buffer): it counts the line, and keeps it when the
// parser needs it.
func (b *bodyReader) startLine(ctx context.Context, p []byte, complete bool) error {
	b.line++
	if b.line%ctxCheckLines == 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	kind, name := b.lx.classify(p, complete)
	b.keepRest = b.noteLine(kind, name)
	if b.keepRest {
		b.keep(p, true)
	}
	return nil
}

// noteLine counts a line of that kind and family name (samples, engine
// prefixes, a wanted family's series) and reports whether the parser needs
// it: a line of a wanted family, or one the lexer could not tell.
func (b *bodyReader) noteLine(kind lineKind, name []byte) bool {
	switch kind {
	case lineSkip:
		return false
	case lineSample:
		b.out.samples++
		notePrefixes(name, b.prefixes)
		fallthrough
	case lineMeta:
		i := wantedIndex(name)
		if i < 0 {
			return false
		}
		if kind == lineSample {
			if b.series[i]++; b.series[i] > maxSeriesPerFamily && b.over == nil {
				b.over = fmt.Errorf("%w: family %q has more than %d series", errRefused, name, maxSeriesPerFamily)
			}
		}
	}
	return true
}

// keep adds p, a line or a piece of one (not the first: first is false),
// to the parser's text, unless that passes maxKeptBytes.
func (b *bodyReader) keep(p []byte, first bool) {
	if b.over != nil {
		return
	}
	if b.kept.Len()+len(p) > maxKeptBytes {
		b.over = fmt.Errorf("%w: the mapped families take more than %d bytes (at line %d)", errRefused, maxKeptBytes, b.line)
		return
	}
	if first {
		b.out.keptLines = append(b.out.keptLines, b.line)
	}
	b.kept.Write(p)
}

// parseKept parses the kept text into the wanted families. A parse error's
// line is the body's.
func (b *bodyReader) parseKept(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(ctxio.Reader{Ctx: ctx, R: &b.kept}) // bounded by the scrape's context too
	if err != nil {
		var pe expfmt.ParseError
		if errors.As(err, &pe) && pe.Line >= 1 && pe.Line <= len(b.out.keptLines) {
			pe.Line = b.out.keptLines[pe.Line-1]
			return nil, pe
		}
		return nil, err
	}
	// A line the lexer could not tell (a piece of a long line) may have
	// been of another family: only the wanted ones are kept.
	for n := range fams {
		if _, ok := wanted[n]; !ok {
			delete(fams, n)
		}
	}
	if err := duplicateSeries(fams); err != nil {
		return nil, err
	}
	return fams, nil
}

// detectedEngine is detectEngine's answer from the prefixes seen: the
// first mapping in the table's order that has one; "" when none has.
func detectedEngine(prefixes []bool) string {
	for _, m := range engineMappings {
		if mappingSeen(m, prefixes) {
			return m.name
		}
	}
	return ""
}

// enginePrefixes lists every mapping's name prefixes, in the table's
// order; prefixOwner is the mapping each belongs to.
var enginePrefixes, prefixOwner = func() ([]string, []string) {
	var ps, owners []string
	for _, m := range engineMappings {
		for _, p := range m.prefixes {
			ps = append(ps, p)
			owners = append(owners, m.name)
		}
	}
	return ps, owners
}()

// notePrefixes marks the engine prefixes that the sample name n starts
// with. A name too long to be kept whole still has its first maxNameBytes,
// longer than any prefix.
func notePrefixes(n []byte, seen []bool) {
	for i, p := range enginePrefixes {
		if !seen[i] && len(n) >= len(p) && string(n[:len(p)]) == p {
			seen[i] = true
		}
	}
}

// mappingSeen reports whether a sample name had one of m's prefixes: the
// first such mapping in the table's order is detectEngine's answer.
func mappingSeen(m engineMapping, seen []bool) bool {
	for i, owner := range prefixOwner {
		if owner == m.name && seen[i] {
			return true
		}
	}
	return false
}

// duplicateSeries refuses a scrape where one family has the same label set
// twice (in any order; an empty value is the label's absence, as in
// Prometheus), or a histogram or summary the same bucket or quantile twice:
// Prometheus refuses such a scrape, and summing the two would expose a
// number the engine never reported.
func duplicateSeries(fams map[string]*dto.MetricFamily) error {
	var key []byte
	var ls []labelPair
	for _, name := range sortedNames(fams) {
		mf := fams[name]
		seen := make(map[string]struct{}, len(mf.GetMetric()))
		for _, m := range mf.GetMetric() {
			ls = ls[:0]
			for _, lp := range m.GetLabel() {
				if lp.GetValue() != "" {
					ls = append(ls, labelPair{lp.GetName(), lp.GetValue()})
				}
			}
			slices.SortFunc(ls, func(a, b labelPair) int { return strings.Compare(a.name, b.name) })
			key = key[:0]
			for _, l := range ls {
				key = append(key, l.name...)
				key = append(key, 0xff)
				key = append(key, l.value...)
				key = append(key, 0xff)
			}
			if _, dup := seen[string(key)]; dup {
				return fmt.Errorf("%w: duplicate series %s", errRefused, seriesName(name, ls))
			}
			seen[string(key)] = struct{}{}
			if b := duplicateBound(m); b != "" {
				return fmt.Errorf("%w: duplicate series %s (%s twice)", errRefused, seriesName(name, ls), b)
			}
		}
	}
	return nil
}

type labelPair struct{ name, value string }

// duplicateBound names a histogram bucket or a summary quantile that one
// series has twice, or "".
func duplicateBound(m *dto.Metric) string {
	var bounds []float64
	what := ""
	if h := m.GetHistogram(); h != nil {
		what = "le"
		for _, b := range h.GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
		}
	} else if s := m.GetSummary(); s != nil {
		what = "quantile"
		for _, q := range s.GetQuantile() {
			bounds = append(bounds, q.GetQuantile())
		}
	}
	slices.Sort(bounds)
	for i := 1; i < len(bounds); i++ {
		if bounds[i] == bounds[i-1] {
			return what + "=" + strconv.FormatFloat(bounds[i], 'g', -1, 64)
		}
	}
	return ""
}

func sortedNames(fams map[string]*dto.MetricFamily) []string {
	out := make([]string, 0, len(fams))
	for n := range fams {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// seriesName prints a series as the text format does, for the reason.
func seriesName(name string, ls []labelPair) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.name)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(l.value))
	}
	b.WriteByte('}')
	return b.String()
}

// lineKind is what a line is to the parser.
type lineKind uint8

const (
	// lineSkip: no effect on the parser (an empty line, a plain comment,
	// a HELP or TYPE that names no family).
	lineSkip lineKind = iota
	// lineMeta: a HELP or TYPE line of the family named.
	lineMeta
	// lineSample: a sample of the family named.
	lineSample
	// lineInvalid: the parser would refuse the line (or its name cannot be
	// told): it is handed to the parser, which says why.
	lineInvalid
)

// lexer tells a line's kind and family name by the parser's rules,
// without allocating: the name is read into a fixed buffer.
type lexer struct {
	b        []byte
	i        int
	complete bool               // b is a whole line (its end reads as '\n')
	name     [maxNameBytes]byte // the token last read
	n        int                // its length, which may pass len(name)
	fam      [maxNameBytes]byte // the family's name, once read
	famN     int
}

// at returns the current byte; ok is false when the line's piece at hand
// ends before it.
func (l *lexer) at() (byte, bool) {
	if l.i < len(l.b) {
		return l.b[l.i], true
	}
	if l.complete && l.i == len(l.b) {
		return '\n', true
	}
	return 0, false
}

// skipBlank skips ' ' and '\t', as the parser's skipBlankTab.
func (l *lexer) skipBlank() (byte, bool) {
	for {
		c, ok := l.at()
		if !ok || (c != ' ' && c != '\t') {
			return c, ok
		}
		l.i++
	}
}

// saveFamily keeps the token just read as the family's name, and returns
// it: a name too long to hold is not wanted, and its start still serves
// the prefixes.
func (l *lexer) saveFamily() []byte {
	l.famN = copy(l.fam[:], l.name[:min(l.n, len(l.name))])
	if l.n > len(l.name) {
		l.famN = len(l.fam) + 1
	}
	return l.family()
}

func (l *lexer) family() []byte {
	if l.famN < 0 {
		return nil
	}
	if l.famN > len(l.fam) {
		return l.fam[:]
	}
	return l.fam[:l.famN]
}

func (l *lexer) addName(c byte) {
	if l.n < len(l.name) {
		l.name[l.n] = c
	}
	l.n++
}

// token reads a metric name (label is false) or a label name (true) as the
// parser's readTokenAsMetricName and readTokenAsLabelName do: quotes
// toggle, escapes \\ \n \" apply, and the token ends at the first byte that
// cannot continue it. ok is false on the parser's errors or when the piece
// at hand ends first.
func (l *lexer) token(label bool) bool {
	l.n = 0
	c, ok := l.at()
	if !ok {
		return false
	}
	if !nameStart(c, label) {
		return true
	}
	quoted, escaped := false, false
	for {
		if escaped {
			switch c {
			case '\\':
				l.addName('\\')
			case 'n':
				l.addName('\n')
			case '"':
				l.addName('"')
			default:
				return false
			}
			escaped = false
		} else {
			switch c {
			case '"':
				quoted = !quoted
				if !quoted {
					l.i++
					return true
				}
			case '\n':
				return false
			case '\\':
				escaped = true
			default:
				l.addName(c)
			}
		}
		l.i++
		if c, ok = l.at(); !ok {
			return false
		}
		if !quoted && !nameContinues(c, label) {
			return true
		}
	}
}

func nameStart(c byte, label bool) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '"' || (!label && c == ':')
}

// nameContinues is the parser's continuation test outside quotes (inside
// them every byte continues, until the closing quote).
func nameContinues(c byte, label bool) bool {
	return nameStart(c, label) || (c >= '0' && c <= '9')
}

// validName: the parser's UTF-8 scheme wants a name non-empty and valid
// UTF-8; a name too long to hold is taken as valid (it is not wanted).
func (l *lexer) validName() bool {
	if l.n == 0 {
		return false
	}
	return l.n > len(l.name) || utf8.Valid(l.name[:l.n])
}

// classify tells what line b is; name is valid until the next call.
func (l *lexer) classify(b []byte, complete bool) (lineKind, []byte) {
	*l = lexer{b: b, complete: complete}
	c, ok := l.skipBlank()
	switch {
	case !ok:
		return lineInvalid, nil
	case c == '\n':
		return lineSkip, nil
	case c == '#':
		return l.comment()
	case c == '{':
		return l.braced()
	}
	if !l.token(false) {
		return lineInvalid, nil
	}
	if !l.validName() {
		return lineInvalid, nil
	}
	name := l.saveFamily()
	if l.rest() != lineSample && l.complete {
		return lineInvalid, nil
	}
	// An incomplete piece: told by its name, the rest unchecked.
	return lineSample, name
}

// comment reads a line starting with '#', as the parser's startComment.
func (l *lexer) comment() (lineKind, []byte) {
	l.i++
	c, ok := l.skipBlank()
	if !ok {
		return lineInvalid, nil
	}
	if c == '\n' {
		return lineSkip, nil
	}
	start := l.i
	for ok && c != ' ' && c != '\t' && c != '\n' {
		l.i++
		c, ok = l.at()
	}
	if !ok {
		return lineInvalid, nil
	}
	if c == '\n' {
		return lineSkip, nil
	}
	kw := string(l.b[start:l.i])
	if kw != "HELP" && kw != "TYPE" {
		return lineSkip, nil
	}
	if c, ok = l.skipBlank(); !ok {
		return lineInvalid, nil
	}
	if !l.token(false) {
		return lineInvalid, nil
	}
	if c, ok = l.at(); !ok {
		return lineInvalid, nil
	}
	if c == '\n' {
		return lineSkip, nil // a name alone: the parser does nothing
	}
	if (c != ' ' && c != '\t') || !l.validName() {
		return lineInvalid, nil
	}
	name := l.saveFamily()
	if kw == "TYPE" && l.complete {
		if c, _ = l.skipBlank(); c != '\n' && !knownType(l.b[l.i:]) {
			return lineInvalid, nil
		}
	}
	if kw == "HELP" && l.complete && !validHelp(l.b[l.i:]) {
		return lineInvalid, nil
	}
	return lineMeta, name
}

// knownType is the parser's test of a TYPE line's type: its upper case
// (Unicode's: "hıstogram" passes) a dto.MetricType name, or GAUGEHISTOGRAM.
// An ASCII type is compared in place; only another costs a string.
func knownType(b []byte) bool {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	ascii := true
	for _, c := range b {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if !ascii {
		typ := strings.ToUpper(string(b))
		_, ok := dto.MetricType_value[typ]
		return ok || typ == "GAUGEHISTOGRAM"
	}
	for n := range dto.MetricType_value {
		if equalFoldASCII(b, n) {
			return true
		}
	}
	return equalFoldASCII(b, "GAUGEHISTOGRAM")
}

func equalFoldASCII(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// validHelp: a docstring's escapes are \\, \n and \" only.
func validHelp(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' {
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '\\', 'n', '"':
				i++
			default:
				return false
			}
		}
	}
	return true
}

// braced reads a line starting with '{': the name is the first token inside
// the braces not followed by '=' (labels may come before it).
func (l *lexer) braced() (lineKind, []byte) {
	l.famN = -1
loop:
	for {
		l.i++ // past '{' or ','
		c, ok := l.skipBlank()
		if !ok {
			return lineInvalid, nil
		}
		if c == '}' {
			if l.famN < 0 {
				return lineInvalid, nil // "invalid metric name"
			}
			l.i++
			break
		}
		if !l.token(true) || l.n == 0 {
			return l.partial()
		}
		if c, ok = l.skipBlank(); !ok {
			return l.partial()
		}
		if c != '=' {
			if l.famN >= 0 || (c != ',' && c != '}') || !l.validName() {
				return lineInvalid, nil
			}
			l.saveFamily()
			if c == '}' {
				l.i++
				break
			}
			continue
		}
		if !l.validName() || l.reserved() {
			return lineInvalid, nil
		}
		if !l.labelValue() {
			return l.partial()
		}
		c, ok = l.skipBlank()
		switch {
		case !ok:
			return l.partial()
		case c == '}':
			if l.famN < 0 {
				return lineInvalid, nil
			}
			l.i++
			break loop
		case c != ',':
			return lineInvalid, nil
		}
	}
	if l.value() != lineSample && l.complete {
		return lineInvalid, nil
	}
	return lineSample, l.family()
}

// partial is a braced line that could not be read to its end: an error in
// a whole line, or a long line's first piece. The latter is told by its
// name, if one was read; anything else goes to the parser.
func (l *lexer) partial() (lineKind, []byte) {
	if l.famN < 0 || l.complete {
		return lineInvalid, nil
	}
	return lineSample, l.family()
}

// labelValue reads '=' and a quoted label value (l.i at '='), as the
// parser's startLabelValue.
func (l *lexer) labelValue() bool {
	l.i++
	c, ok := l.skipBlank()
	if !ok || c != '"' {
		return false
	}
	start := l.i + 1
	for escaped := false; ; {
		l.i++
		if c, ok = l.at(); !ok || c == '\n' {
			return false
		}
		if escaped {
			if c != '"' && c != '\\' && c != 'n' {
				return false
			}
			escaped = false
			continue
		}
		if c == '\\' {
			escaped = true
		}
		if c == '"' {
			valid := utf8.Valid(l.b[start:l.i])
			l.i++
			return valid
		}
	}
}

// reserved: the label name just read is __name__, which the parser refuses.
func (l *lexer) reserved() bool {
	return l.n == len(model.MetricNameLabel) && string(l.name[:l.n]) == model.MetricNameLabel
}

// rest checks what follows a plain sample's name: optional labels, the
// value, an optional timestamp.
func (l *lexer) rest() lineKind {
	c, ok := l.skipBlank()
	if !ok {
		return lineInvalid
	}
	if c == '{' {
		for {
			l.i++
			if c, ok = l.skipBlank(); !ok {
				return lineInvalid
			}
			if c == '}' {
				l.i++
				break
			}
			if !l.token(true) || l.n == 0 || !l.validName() {
				return lineInvalid
			}
			if c, ok = l.skipBlank(); !ok || c != '=' {
				return lineInvalid
			}
			if l.reserved() {
				return lineInvalid
			}
			if !l.labelValue() {
				return lineInvalid
			}
			if c, ok = l.skipBlank(); !ok {
				return lineInvalid
			}
			if c == '}' {
				l.i++
				break
			}
			if c != ',' {
				return lineInvalid
			}
		}
	}
	return l.value()
}

// value checks the sample value and optional timestamp, as the parser's
// readingValue and startTimestamp: a float (not in hex, no '_'), then
// either the line's end or blanks, an integer, and the end at once.
func (l *lexer) value() lineKind {
	c, ok := l.skipBlank()
	if !ok {
		return lineInvalid
	}
	tok, c, ok := l.untilBlank(c)
	if !ok || bytes.ContainsAny(tok, "pP_") || !isFloat(tok) {
		return lineInvalid
	}
	if c == '\n' {
		return lineSample
	}
	if c, ok = l.skipBlank(); !ok {
		return lineInvalid
	}
	tok, c, ok = l.untilBlank(c)
	if !ok || c != '\n' || !isInt(tok) {
		return lineInvalid
	}
	return lineSample
}

func (l *lexer) untilBlank(c byte) ([]byte, byte, bool) {
	start := l.i
	ok := true
	for ok && c != ' ' && c != '\t' && c != '\n' {
		l.i++
		c, ok = l.at()
	}
	end := min(l.i, len(l.b))
	return l.b[start:end], c, ok
}

// isFloat and isInt parse as the parser does, without allocating for the
// short tokens of a real body (the compiler keeps a small string(b) on the
// stack when it does not escape).
func isFloat(b []byte) bool {
	_, err := strconv.ParseFloat(string(b), 64)
	return err == nil
}

func isInt(b []byte) bool {
	_, err := strconv.ParseInt(string(b), 10, 64)
	return err == nil
}
