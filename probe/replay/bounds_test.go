package replay

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// One valid trace of two records per format, lines ending in "\n".
var twoRecords = map[Format]string{
	FormatAzure: "TIMESTAMP,ContextTokens,GeneratedTokens\n" +
		"2023-11-16 18:17:03.9799600,4808,10\n" +
		"2023-11-16 18:17:04.0319600,3180,8\n",
	FormatBurstGPT: "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" +
		"5,ChatGPT,472,18,490,Conversation log\n" +
		"45,GPT-4,1087,250,1337,API log\n",
	FormatMooncake: `{"timestamp": 1000, "input_length": 600, "output_length": 3, "hash_ids": [7, 8]}` + "\n" +
		`{"timestamp": 1500, "input_length": 512, "output_length": 1, "hash_ids": [7]}` + "\n",
	FormatJSONL: `{"offset":0,"path":"/v1/chat/completions","body":{"a":1},"output_tokens":7}` + "\n" +
		`{"offset":0.5,"body":{"b":2}}` + "\n",
}

// TestCROnlyLineEndings: a file whose lines end in a bare CR is refused,
// whatever the policy, with an error that names the line endings and does
// not quote the file (it used to quote it whole: the file is one line).
func TestCROnlyLineEndings(t *testing.T) {
	const want = `trace.csv: CR-only line endings (\r): save the file with \n or \r\n line endings`
	// A large Azure trace, as the issue had it (740 KB quoted).
	var big strings.Builder
	big.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\r")
	for i := range 20000 {
		fmt.Fprintf(&big, "2023-11-16 18:17:%02d.%07d,%d,%d\r", i/1000%60, i%1000*1000, 100+i%977, 1+i%13)
	}
	for _, tc := range []struct {
		name   string
		format Format
		in     string
		max    int // MaxLineBytes, 0 for the default
	}{
		{"azure", FormatAzure, strings.ReplaceAll(twoRecords[FormatAzure], "\n", "\r"), 0},
		{"azure, 20000 rows", FormatAzure, big.String(), 0},
		{"azure, longer than a line may be", FormatAzure, big.String(), 1 << 16},
		{"burstgpt", FormatBurstGPT, strings.ReplaceAll(twoRecords[FormatBurstGPT], "\n", "\r"), 0},
		{"mooncake", FormatMooncake, strings.ReplaceAll(twoRecords[FormatMooncake], "\n", "\r"), 0},
		{"mooncake, longer than a line may be", FormatMooncake, strings.ReplaceAll(twoRecords[FormatMooncake], "\n", "\r"), 100},
		{"jsonl", FormatJSONL, strings.ReplaceAll(twoRecords[FormatJSONL], "\n", "\r"), 0},
		{"jsonl with a BOM", FormatJSONL, "\ufeff" + strings.ReplaceAll(twoRecords[FormatJSONL], "\n", "\r"), 0},
	} {
		for _, policy := range []Policy{Refuse, Skip} {
			t.Run(fmt.Sprintf("%s/%s", tc.name, policy), func(t *testing.T) {
				_, err := Read(strings.NewReader(tc.in), "trace.csv", tc.format, ReadOptions{OnMalformed: policy, MaxLineBytes: tc.max})
				if !errors.Is(err, ErrCROnly) || err.Error() != want {
					t.Fatalf("err = %.300v (%d bytes), want %q", err, len(fmt.Sprint(err)), want)
				}
			})
		}
	}

	// CRLF and a last line without its end are fine; a bare CR in a later
	// line is that line's fault, and its error says what it holds.
	for f, in := range twoRecords {
		tr, err := Read(strings.NewReader(strings.TrimSuffix(strings.ReplaceAll(in, "\n", "\r\n"), "\r\n")+"\r"), "t", f, ReadOptions{})
		if err != nil || len(tr.Records) != 2 {
			t.Errorf("%s, CRLF: %v", f, err)
		}
	}
	in := twoRecords[FormatAzure] + "2023-11-16 18:17:05,1,1\r2023-11-16 18:17:06,2,2\n"
	_, err := Read(strings.NewReader(in), "t.csv", FormatAzure, ReadOptions{})
	var le *LineError
	if !errors.As(err, &le) || le.Line != 4 || !strings.Contains(le.Reason, "bare CR") {
		t.Errorf("bare CR in line 4: %v", err)
	}
}

// TestErrorsQuoteBoundedInput: no error quotes more than about maxQuoted
// bytes of its input, however long the line; a cut quote says how long the
// input was.
func TestErrorsQuoteBoundedInput(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	digits := strings.Repeat("9", 100_000)
	azure := "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,1,1\n"
	burst := "Timestamp,Request tokens,Response tokens\n1,2,3\n"
	moon := `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n"
	jsonl := `{"offset":0,"body":{}}` + "\n"
	for _, tc := range []struct {
		name   string
		format Format
		in     string
		line   int
	}{
		{"azure header", FormatAzure, "TIMESTAMP,ContextTokens," + long + "\n2023-11-16 18:17:03.9,1,1\n", 1},
		{"azure header with a BOM", FormatAzure, "\ufeffTIMESTAMP," + long + "\n", 1},
		{"azure timestamp", FormatAzure, azure + "2023-11-16 " + long + ",1,1\n", 3},
		{"azure tokens", FormatAzure, azure + "2023-11-16 18:17:04," + long + ",1\n", 3},
		{"azure quoted tokens", FormatAzure, azure + `2023-11-16 18:17:04,"` + long + `",1` + "\n", 3},
		{"azure control bytes", FormatAzure, azure + "2023-11-16 18:17:04," + strings.Repeat("\x01", 10_000) + ",1\n", 3},
		{"azure invalid UTF-8", FormatAzure, azure + "2023-11-16 18:17:04," + strings.Repeat("\xff", 10_000) + ",1\n", 3},
		{"burstgpt timestamp", FormatBurstGPT, burst + long + ",2,3\n", 3},
		{"burstgpt tokens", FormatBurstGPT, burst + "1," + digits + ",3\n", 3},
		{"mooncake unknown field", FormatMooncake, moon + `{"` + long + `": 1}` + "\n", 2},
		{"mooncake long timestamp", FormatMooncake, moon + `{"timestamp": ` + digits + `, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n", 2},
		{"mooncake long hash id", FormatMooncake, moon + `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [` + digits + `]}` + "\n", 2},
		{"mooncake long input length", FormatMooncake, moon + `{"timestamp": 1, "input_length": ` + digits + `, "output_length": 1, "hash_ids": [1]}` + "\n", 2},
		{"jsonl method", FormatJSONL, jsonl + `{"offset":1,"method":"` + long + `","body":{}}` + "\n", 2},
		{"jsonl unknown field", FormatJSONL, jsonl + `{"offset":1,"` + long + `":1,"body":{}}` + "\n", 2},
		{"jsonl bad time", FormatJSONL, `{"time":"` + long + `","body":{}}` + "\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.in), "f", tc.format, ReadOptions{})
			var le *LineError
			if !errors.As(err, &le) || le.Line != tc.line {
				t.Fatalf("err = %.300v, want a *LineError at line %d", err, tc.line)
			}
			checkBounded(t, err.Error())
			if tc.line > 1 {
				tr, err := Read(strings.NewReader(tc.in), "f", tc.format, ReadOptions{OnMalformed: Skip})
				if err != nil || len(tr.Errors) != 1 {
					t.Fatalf("skip: %.300v, errors %d", err, len(tr.Errors))
				}
				checkBounded(t, tr.Errors[0].Error())
			}
		})
	}

	// A recorded body's path, in the Source's error.
	tr := &Trace{Name: "x", Records: []Record{{Body: []byte(`{}`), Path: "/" + long, File: "x", Line: 1}}}
	_, err := NewSource(tr, Options{Flavor: flavorOf(true)})
	if err == nil {
		t.Fatal("a body for an unknown path was accepted")
	}
	checkBounded(t, err.Error())
}

func checkBounded(t *testing.T, msg string) {
	t.Helper()
	if len(msg) > 2*maxReason || !strings.Contains(msg, "bytes)") || !strings.Contains(msg, "…") {
		t.Errorf("error of %d bytes, want at most %d with an ellipsis and the input's length: %.300s", len(msg), 2*maxReason, msg)
	}
}

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"abc", `"abc"`},
		{strings.Repeat("a", maxQuoted), `"` + strings.Repeat("a", maxQuoted) + `"`},
		{strings.Repeat("a", maxQuoted+1), `"` + strings.Repeat("a", maxQuoted) + `"… (201 bytes)`},
		{strings.Repeat("é", 150), `"` + strings.Repeat("é", 100) + `"… (300 bytes)`},
	} {
		if got := quote(tc.in); got != tc.want {
			t.Errorf("quote(%.20q...) = %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, s := range []string{strings.Repeat("\x00", 1000), strings.Repeat("\xa5", 51), "0" + strings.Repeat("\xa5", 50), strings.Repeat("é", 101) + "\xff"} {
		if q := quote(s); len(q) > maxQuoted+20 || len(q) < maxQuoted/2 || !strings.HasSuffix(q, fmt.Sprintf("… (%d bytes)", len(s))) {
			t.Errorf("quote of %d bytes is %d bytes: %s", len(s), len(q), q)
		}
	}
	if c := clip(strings.Repeat("\xa5", 600), maxReason); len(c) > maxReason+3*maxReason/2 || !strings.HasSuffix(c, "… (600 bytes)") {
		t.Errorf("clip of invalid UTF-8: %d bytes", len(c))
	}
}

// TestBOM: every reader ignores a UTF-8 byte order mark at the start of a
// file, also in each file of a shadow store.
func TestBOM(t *testing.T) {
	for f, in := range twoRecords {
		for _, eol := range []string{"\n", "\r\n"} {
			tr, err := Read(strings.NewReader("\ufeff"+strings.ReplaceAll(in, "\n", eol)), "bom", f, ReadOptions{})
			if err != nil || len(tr.Records) != 2 || tr.Records[0].Line != map[bool]int{true: 2, false: 1}[f == FormatAzure || f == FormatBurstGPT] {
				t.Errorf("%s, %q line ends: %v, %+v", f, eol, err, tr)
			}
		}
	}
	dir := t.TempDir()
	for i, line := range strings.SplitAfter(strings.TrimSuffix(twoRecords[FormatJSONL], "\n"), "\n") {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("shadow-%d.jsonl", i)), []byte("\ufeff"+line), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if tr, err := ReadFile(dir, FormatJSONL, ReadOptions{}); err != nil || len(tr.Records) != 2 {
		t.Errorf("shadow store with BOMs: %v", err)
	}
	// Only at the start: a BOM inside is data.
	_, err := Read(strings.NewReader(twoRecords[FormatMooncake]+"\ufeff"+`{"timestamp": 1}`+"\n"), "bom", FormatMooncake, ReadOptions{})
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 {
		t.Errorf("BOM in line 3: %v", err)
	}
}

// TestFieldBounds: token counts, timestamps and hash id lists out of their
// bounds are malformed lines; the bounds themselves are fine.
func TestFieldBounds(t *testing.T) {
	const azureHead = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
	const burstHead = "Timestamp,Request tokens,Response tokens\n"
	moon := func(ts string, in, out int, ids string) string {
		return fmt.Sprintf(`{"timestamp": %s, "input_length": %d, "output_length": %d, "hash_ids": [%s]}`, ts, in, out, ids) + "\n"
	}
	for _, tc := range []struct {
		name   string
		format Format
		in     string
		reason string // "" for a valid line
	}{
		{"azure prompt at the ceiling", FormatAzure, azureHead + "2023-11-16 18:17:03,1048576,1048576\n", ""},
		{"azure prompt over the ceiling", FormatAzure, azureHead + "2023-11-16 18:17:03,1048577,1\n", "ceiling of 1048576"},
		{"azure output over the ceiling", FormatAzure, azureHead + "2023-11-16 18:17:03,1,1000000000000000\n", "ceiling"},
		{"azure int64 overflow", FormatAzure, azureHead + "2023-11-16 18:17:03,1,99999999999999999999\n", "not an integer"},
		{"azure year 9999", FormatAzure, azureHead + "9999-11-16 18:17:03,1,1\n", "between 1970 and 2200"},
		{"azure before 1970", FormatAzure, azureHead + "1969-12-31 23:59:59,1,1\n", "between 1970 and 2200"},
		{"azure too many fields", FormatAzure, azureHead + "2023-11-16 18:17:03,1,1" + strings.Repeat(",", 100_000) + "\n", "more than 3 fields"},
		{"burstgpt 100 years", FormatBurstGPT, burstHead + "3153600000,1,1\n", ""},
		{"burstgpt beyond 100 years", FormatBurstGPT, burstHead + "3153600001,1,1\n", "seconds in [0, 3153600000]"},
		{"burstgpt inf", FormatBurstGPT, burstHead + "+Inf,1,1\n", "seconds"},
		{"burstgpt nan", FormatBurstGPT, burstHead + "NaN,1,1\n", "seconds"},
		{"burstgpt negative", FormatBurstGPT, burstHead + "-1,1,1\n", "seconds"},
		{"burstgpt negative tokens", FormatBurstGPT, burstHead + "1,-1,1\n", "negative"},
		{"mooncake input 1e15", FormatMooncake, moon("0", 1_000_000_000_000_000, 1, "1"), `"input_length" 1000000000000000 must be in [1, 1048576]`},
		{"mooncake output over the ceiling", FormatMooncake, moon("0", 1, 1<<20+1, "1"), `"output_length"`},
		{"mooncake timestamp 1e300", FormatMooncake, moon("1e300", 1, 1, "1"), "milliseconds"},
		{"mooncake timestamp 2^63 ns", FormatMooncake, moon("9223372036854.776", 1, 1, "1"), "milliseconds"},
		{"mooncake hash ids beyond the prompt", FormatMooncake, moon("0", 2, 1, "1,2,3"), "more blocks than tokens"},
		{"mooncake hash ids of one-token blocks", FormatMooncake, moon("0", 3, 1, "1,2,3"), ""},
		{"jsonl output over the ceiling", FormatJSONL, `{"offset":0,"body":{},"output_tokens":1048577}` + "\n", `"output_tokens" 1048577 must be in [0, 1048576]`},
		// 2^63 ns: used to wrap to a negative offset.
		{"jsonl offset 2^63 ns", FormatJSONL, `{"offset":9223372036.854776,"body":{}}` + "\n", `"offset"`},
		{"jsonl year 9999", FormatJSONL, `{"time":"9999-01-01T00:00:00Z","body":{}}` + "\n", "between 1970 and 2200"},
		{"jsonl year 2199", FormatJSONL, `{"time":"2199-01-01T00:00:00Z","body":{}}` + "\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Read(strings.NewReader(tc.in), "f", tc.format, ReadOptions{})
			if tc.reason == "" {
				if err != nil || len(tr.Records) != 1 {
					t.Fatalf("err = %v", err)
				}
				return
			}
			var le *LineError
			if !errors.As(err, &le) || !strings.Contains(le.Reason, tc.reason) {
				t.Fatalf("err = %.300v, want ...%s...", err, tc.reason)
			}
		})
	}

	// A header of too many columns.
	_, err := Read(strings.NewReader("TIMESTAMP,ContextTokens,GeneratedTokens"+strings.Repeat(",x", maxColumns)+"\n"), "f", FormatAzure, ReadOptions{})
	if err == nil || !strings.Contains(err.Error(), "more than 1024 columns") {
		t.Errorf("a header of %d columns: %v", maxColumns+3, err)
	}
}

// TestOffsetSpan: the earliest and latest times a reader accepts are
// apart by less than a Duration holds, so offsets from the first record
// never wrap.
func TestOffsetSpan(t *testing.T) {
	in := `{"time":"2199-12-31T23:59:59Z","body":{}}` + "\n" + `{"time":"1970-01-01T00:00:00Z","body":{}}` + "\n"
	tr, err := Read(strings.NewReader(in), "f", FormatJSONL, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tr.Records[1].Offset, maxTime.Add(-time.Second).Sub(minTime); got != want || got <= 0 {
		t.Errorf("span %v, want %v", got, want)
	}
}

// TestMaxRecords: a trace of more records than MaxRecords is refused
// whatever the policy, across the files of a store too.
func TestMaxRecords(t *testing.T) {
	in := twoRecords[FormatMooncake] + twoRecords[FormatMooncake]
	for _, p := range []Policy{Refuse, Skip} {
		_, err := Read(strings.NewReader(in), "f", FormatMooncake, ReadOptions{OnMalformed: p, MaxRecords: 3})
		var le *LineError
		if !errors.As(err, &le) || le.Line != 4 || !strings.Contains(le.Reason, "more than 3 records") {
			t.Errorf("%s: err = %v, want f:4: more than 3 records", p, err)
		}
		if tr, err := Read(strings.NewReader(in), "f", FormatMooncake, ReadOptions{OnMalformed: p, MaxRecords: 4}); err != nil || len(tr.Records) != 4 {
			t.Errorf("%s: 4 records of at most 4: %v", p, err)
		}
	}
	dir := t.TempDir()
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("s%d.jsonl", i)), []byte(twoRecords[FormatJSONL]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err := ReadFile(dir, FormatJSONL, ReadOptions{MaxRecords: 5})
	if err == nil || !strings.Contains(err.Error(), "s2.jsonl:2: more than 5 records") {
		t.Errorf("store: err = %v", err)
	}
}

// TestHeaderTooLongRefused: a header longer than a line may be is the
// file's fault; under Skip it used to be skipped, and the first record
// read as the header.
func TestHeaderTooLongRefused(t *testing.T) {
	in := "TIMESTAMP,ContextTokens,GeneratedTokens," + strings.Repeat("x", 300) + "\n2023-11-16 18:17:03,1,1\n"
	for _, p := range []Policy{Refuse, Skip} {
		_, err := Read(strings.NewReader(in), "f", FormatAzure, ReadOptions{OnMalformed: p, MaxLineBytes: 200})
		var le *LineError
		if !errors.As(err, &le) || le.Line != 1 || !strings.Contains(le.Reason, "header line longer than 200 bytes") {
			t.Errorf("%s: err = %v", p, err)
		}
	}
}

// TestSourceBounds: a Trace built in memory cannot make the Source
// allocate beyond the token ceiling or overflow its arithmetic.
func TestSourceBounds(t *testing.T) {
	rec := func(in, out int) Record { return Record{InputTokens: in, OutputTokens: out, File: "m", Line: 1} }
	for _, tc := range []struct {
		name   string
		recs   []Record
		opts   Options
		reason string
	}{
		{"prompt 1e15", []Record{rec(1e15, 1)}, Options{}, "ceiling of 1048576"},
		{"output 1e15", []Record{rec(10, 1e15)}, Options{}, "ceiling"},
		{"body output 1e15", []Record{{Body: []byte(`{}`), OutputTokens: 1e15, File: "m", Line: 1}}, Options{ForceOutputTokens: true, Flavor: flavorOf(true)}, "ceiling"},
		{"block size 2^40", []Record{rec(10, 1)}, Options{BlockSize: 1 << 40}, "block size"},
		{"slow speed", []Record{rec(10, 1), {Offset: 100 * time.Hour, InputTokens: 10, OutputTokens: 1, File: "m", Line: 2}}, Options{Speed: 1e-12}, "beyond"},
		{"slow loop", []Record{rec(10, 1)}, Options{Speed: 1e-9, Loop: true, End: time.Hour}, "beyond"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSource(&Trace{Name: "m", Records: tc.recs}, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("err = %v, want ...%s...", err, tc.reason)
			}
		})
	}

	// A ceiling far below a request per century: the schedule ends rather
	// than wraps.
	s, err := NewSource(tokenTrace(0, 1, 2, 3), Options{MaxRate: 1e-300})
	if err != nil {
		t.Fatal(err)
	}
	got := offsets(t, s, 10)
	for i := range got {
		if got[i] < 0 || i > 0 && got[i] <= got[i-1] {
			t.Fatalf("offsets %v: not increasing", got)
		}
	}

	// The longest prompt a trace may ask for is a few MB.
	s, err = NewSource(&Trace{Records: []Record{rec(maxTokens, 1)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Schedule().Next()
	if p := s.Prompts().Next(); len(strings.Fields(p.Text)) != maxTokens || len(p.Text) > 9*maxTokens {
		t.Errorf("prompt of %d words, %d bytes", len(strings.Fields(p.Text)), len(p.Text))
	}
}

// TestOverContext counts the token records longer than a context.
func TestOverContext(t *testing.T) {
	tr := &Trace{Name: "m", Records: []Record{
		{InputTokens: 60, OutputTokens: 4, File: "m", Line: 2},       // 64: fits
		{InputTokens: 60, OutputTokens: 5, File: "m", Line: 3},       // 65
		{InputTokens: 100, OutputTokens: 1, File: "m", Line: 4},      // 101
		{InputTokens: 10, OutputTokens: 90, File: "m", Line: 5},      // 100
		{Body: []byte(`{}`), OutputTokens: 1000, File: "m", Line: 6}, // unknown
	}}
	s, err := NewSource(tr, Options{Flavor: flavorOf(false)})
	if err != nil {
		t.Fatal(err)
	}
	if rows, largest, at := s.OverContext(64); rows != 3 || largest != 101 || at != "m:4" {
		t.Errorf("OverContext(64) = %d, %d, %s; want 3, 101, m:4", rows, largest, at)
	}
	if rows, _, _ := s.OverContext(101); rows != 0 {
		t.Errorf("OverContext(101) = %d rows", rows)
	}
}

type refusalRecorder struct {
	fakeRecorder
	mu      sync.Mutex
	refused []string
}

func (r *refusalRecorder) Refused(rec *Record, obs *observation.Request) {
	r.mu.Lock()
	r.refused = append(r.refused, fmt.Sprintf("%s:%d %d", rec.File, rec.Line, obs.HTTPStatus))
	r.mu.Unlock()
}

// TestRefusalRecorder: a Recorder that hears refusals hears each http_4xx,
// with its record.
func TestRefusalRecorder(t *testing.T) {
	rec := &refusalRecorder{}
	s, err := NewSource(tokenTrace(0, 1, 2), Options{MaxRate: 1000, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []observation.Request{
		{Outcome: observation.Success, HTTPStatus: 200},
		{Outcome: observation.HTTP4xx, HTTPStatus: 400},
		{Outcome: observation.HTTP5xx, HTTPStatus: 500},
	} {
		s.Schedule().Next()
		s.Prompts().Next()
		s.Prompts().Request(o.Seq, &client.Request{})
		s.Prompts().Done(&o)
	}
	if len(rec.refused) != 1 || rec.refused[0] != "mem:3 400" || len(rec.progress) != 3 {
		t.Errorf("refused %v, progress %v", rec.refused, rec.progress)
	}
}

func TestOffsetOf(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		unit time.Duration
		ok   bool
	}{
		{0, time.Second, true}, {maxOffset.Seconds(), time.Second, true}, {math.Nextafter(maxOffset.Seconds(), math.Inf(1)), time.Second, false},
		{math.Inf(1), time.Millisecond, false}, {math.NaN(), time.Second, false}, {-1e-300, time.Second, false},
		{float64(math.MaxInt64) / 1e9, time.Second, false},
	} {
		d, ok := offsetOf(tc.v, tc.unit)
		if ok != tc.ok || d < 0 || d > maxOffset {
			t.Errorf("offsetOf(%v, %v) = %v, %v", tc.v, tc.unit, d, ok)
		}
	}
}
