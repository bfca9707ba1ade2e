package replay

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReadFormats(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format Format
		in     string
		want   []Record // File and Line are checked, Body as a string
	}{
		{
			name:   "azure 2023",
			format: FormatAzure,
			in: "TIMESTAMP,ContextTokens,GeneratedTokens\n" +
				"2023-11-16 18:17:03.9799600,4808,10\n" +
				"2023-11-16 18:17:04.0319600,3180,8\n",
			want: []Record{
				{Offset: 0, InputTokens: 4808, OutputTokens: 10, Line: 2},
				{Offset: 52 * time.Millisecond, InputTokens: 3180, OutputTokens: 8, Line: 3},
			},
		},
		{
			name:   "azure 2024 with zone, other column order, CRLF",
			format: FormatAzure,
			in: "GeneratedTokens,TIMESTAMP,ContextTokens\r\n" +
				"5,2024-05-10 00:00:00.009930+00:00,100\r\n" +
				"\r\n" +
				"6,2024-05-10 00:00:01.5+00:00,200\r\n",
			want: []Record{
				{Offset: 0, InputTokens: 100, OutputTokens: 5, Line: 2},
				{Offset: 1490070 * time.Microsecond, InputTokens: 200, OutputTokens: 6, Line: 4},
			},
		},
		{
			name:   "mooncake, offsets from the first record",
			format: FormatMooncake,
			in: `{"timestamp": 1000, "input_length": 600, "output_length": 3, "hash_ids": [7, 8]}` + "\n" +
				`{"timestamp": 1000.5, "input_length": 512, "output_length": 1, "hash_ids": [7]}` + "\n",
			want: []Record{
				{Offset: 0, InputTokens: 600, OutputTokens: 3, HashIDs: []int64{7, 8}, Line: 1},
				{Offset: 500 * time.Microsecond, InputTokens: 512, OutputTokens: 1, HashIDs: []int64{7}, Line: 2},
			},
		},
		{
			name:   "burstgpt",
			format: FormatBurstGPT,
			in: "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" +
				"5,ChatGPT,472,18,490,Conversation log\n" +
				"\"45\",\"GPT-4\",\"1087\",\"250\",1337,\"API log\"\n",
			want: []Record{
				{Offset: 0, InputTokens: 472, OutputTokens: 18, Line: 2},
				{Offset: 40 * time.Second, InputTokens: 1087, OutputTokens: 250, Line: 3},
			},
		},
		{
			name:   "jsonl with times, sorted by time",
			format: FormatJSONL,
			in: `{"time":"2025-01-01T00:00:01.5Z","path":"/v1/chat/completions","body":{"b":2},"output_tokens":7}` + "\n" +
				`{"time":"2025-01-01T00:00:01Z","body":{"a":1}}` + "\n",
			want: []Record{
				{Offset: 0, Body: []byte(`{"a":1}`), Line: 2},
				{Offset: 500 * time.Millisecond, Body: []byte(`{"b":2}`), OutputTokens: 7, Path: "/v1/chat/completions", Line: 1},
			},
		},
		{
			name:   "jsonl with offsets",
			format: FormatJSONL,
			in:     `{"offset":2.25,"body":{"x":[1, 2]}}` + "\n" + `{"offset":3,"body":{}}`,
			want: []Record{
				{Offset: 0, Body: []byte(`{"x":[1, 2]}`), Line: 1},
				{Offset: 750 * time.Millisecond, Body: []byte(`{}`), Line: 2},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Read(strings.NewReader(tc.in), "t.trace", tc.format, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Records) != len(tc.want) {
				t.Fatalf("%d records, want %d: %+v", len(tr.Records), len(tc.want), tr.Records)
			}
			for i, got := range tr.Records {
				w := tc.want[i]
				if got.Offset != w.Offset || got.InputTokens != w.InputTokens || got.OutputTokens != w.OutputTokens ||
					got.Line != w.Line || got.File != "t.trace" || string(got.Body) != string(w.Body) || got.Path != w.Path ||
					!equalIDs(got.HashIDs, w.HashIDs) {
					t.Errorf("record %d = %+v (body %s), want %+v (body %s)", i, got, got.Body, w, w.Body)
				}
			}
		})
	}
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestMalformedLines: each bad line is refused with its file and line, or
// skipped and counted, and the good lines around it are kept.
func TestMalformedLines(t *testing.T) {
	long := `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [` + strings.Repeat("1,", 100) + `1]}`
	for _, tc := range []struct {
		name    string
		format  Format
		in      string
		badLine int
		reason  string // part of the error
	}{
		{"azure bad time", FormatAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,1,1\nyesterday,5,5\n2023-11-16 18:17:04,2,2\n", 3, "timestamp"},
		{"azure negative", FormatAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,1,1\n2023-11-16 18:17:04,-5,5\n2023-11-16 18:17:04,2,2\n", 3, "negative"},
		{"azure field count", FormatAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,1,1\n2023-11-16 18:17:04,5\n2023-11-16 18:17:04,2,2\n", 3, "2 fields"},
		{"burstgpt open quote", FormatBurstGPT, "Timestamp,Request tokens,Response tokens\n1,2,3\n\"4,5,6\n7,8,9\n", 3, "quoted"},
		{"mooncake not json", FormatMooncake, `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n{not json\n" + `{"timestamp": 2, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n", 2, "invalid character"},
		{"mooncake unknown field", FormatMooncake, `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n" + `{"timestamp": 1, "input_len": 1, "output_length": 1, "hash_ids": [1]}` + "\n" + `{"timestamp": 2, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n", 2, "unknown field"},
		{"mooncake no hash ids", FormatMooncake, `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n" + `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": []}` + "\n" + `{"timestamp": 2, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n", 2, "hash_ids"},
		{"mooncake line too long", FormatMooncake, `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n" + long + "\n" + `{"timestamp": 2, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n", 2, "longer than"},
		{"mooncake trailing data", FormatMooncake, `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n" + `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1]} x` + "\n" + `{"timestamp": 2, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n", 2, "after the JSON"},
		{"jsonl body not object", FormatJSONL, `{"offset":0,"body":{}}` + "\n" + `{"offset":1,"body":"hi"}` + "\n" + `{"offset":2,"body":{}}` + "\n", 2, "body"},
		{"jsonl no time", FormatJSONL, `{"offset":0,"body":{}}` + "\n" + `{"body":{}}` + "\n" + `{"offset":2,"body":{}}` + "\n", 2, "needs"},
		{"jsonl mixes", FormatJSONL, `{"offset":0,"body":{}}` + "\n" + `{"time":"2025-01-01T00:00:00Z","body":{}}` + "\n" + `{"offset":2,"body":{}}` + "\n", 2, "mixes"},
		{"jsonl GET", FormatJSONL, `{"offset":0,"body":{}}` + "\n" + `{"offset":1,"method":"GET","body":{}}` + "\n" + `{"offset":2,"body":{}}` + "\n", 2, "only POST"},
		{"jsonl partial last line", FormatJSONL, `{"offset":0,"body":{}}` + "\n" + `{"offset":1,"body":{}}` + "\n" + `{"offset":2,"bo`, 3, "unexpected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.in), "f.trace", tc.format, ReadOptions{OnMalformed: Refuse, MaxLineBytes: 200})
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("refuse: err = %v, want a *LineError", err)
			}
			if le.File != "f.trace" || le.Line != tc.badLine || !strings.Contains(le.Reason, tc.reason) {
				t.Errorf("refuse: %v, want f.trace:%d: ...%s...", err, tc.badLine, tc.reason)
			}
			if !strings.HasPrefix(err.Error(), "f.trace:") {
				t.Errorf("error %q does not start with file:line", err)
			}

			tr, err := Read(strings.NewReader(tc.in), "f.trace", tc.format, ReadOptions{OnMalformed: Skip, MaxLineBytes: 200})
			if err != nil {
				t.Fatalf("skip: %v", err)
			}
			if tr.Skipped != 1 || len(tr.Errors) != 1 || len(tr.Records) != 2 {
				t.Fatalf("skip: skipped %d, errors %v, %d records; want 1, 1, 2", tr.Skipped, tr.Errors, len(tr.Records))
			}
			if !errors.As(tr.Errors[0], &le) || le.Line != tc.badLine {
				t.Errorf("skip: kept error %v, want line %d", tr.Errors[0], tc.badLine)
			}
		})
	}
}

// TestBadHeaderRefusedWhateverThePolicy: without its columns a CSV file
// cannot be read at all.
func TestBadHeaderRefusedWhateverThePolicy(t *testing.T) {
	for _, p := range []Policy{Refuse, Skip} {
		_, err := Read(strings.NewReader("time,in,out\n1,2,3\n"), "h.csv", FormatAzure, ReadOptions{OnMalformed: p})
		var le *LineError
		if !errors.As(err, &le) || le.Line != 1 || !strings.Contains(le.Reason, "contexttokens") {
			t.Errorf("%s: err = %v, want h.csv:1 naming the missing column", p, err)
		}
	}
}

// TestReadStoreDirectory reads every *.jsonl file of a directory as one
// trace, errors naming the file they are in.
func TestReadStoreDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("shadow-0000000001.jsonl", `{"time":"2025-01-01T00:00:02Z","body":{"n":2}}`+"\n")
	write("shadow-0000000000.jsonl", `{"time":"2025-01-01T00:00:01Z","body":{"n":1}}`+"\n")
	write("notes.txt", "not a trace\n")
	tr, err := ReadFile(dir, FormatJSONL, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Records) != 2 || string(tr.Records[0].Body) != `{"n":1}` || tr.Records[1].Offset != time.Second {
		t.Fatalf("records %+v", tr.Records)
	}
	write("shadow-0000000002.jsonl", "{broken\n")
	_, err = ReadFile(dir, FormatJSONL, ReadOptions{})
	if err == nil || !strings.Contains(err.Error(), "shadow-0000000002.jsonl:1:") {
		t.Errorf("err = %v, want the broken file and line", err)
	}
	if _, err := ReadFile(dir, FormatAzure, ReadOptions{}); err == nil {
		t.Error("a directory read as azure: no error")
	}
}

func TestReadTestdata(t *testing.T) {
	for _, tc := range []struct {
		file   string
		format Format
		n      int
		span   time.Duration
	}{
		{"testdata/azure_code_2023_slice.csv", FormatAzure, 300, 6355147 * time.Microsecond},
		{"testdata/mooncake_fast25_slice.jsonl", FormatMooncake, 200, 47146 * time.Millisecond},
	} {
		tr, err := ReadFile(tc.file, tc.format, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Records) != tc.n || tr.Skipped != 0 {
			t.Errorf("%s: %d records, %d skipped", tc.file, len(tr.Records), tr.Skipped)
		}
		if got := tr.Records[len(tr.Records)-1].Offset; got != tc.span {
			t.Errorf("%s: last offset %v, want %v", tc.file, got, tc.span)
		}
	}
}

// FuzzRead: no input crashes a reader, and every record it returns is
// sane.
func FuzzRead(f *testing.F) {
	f.Add(0, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n")
	f.Add(1, `{"timestamp": 0, "input_length": 40, "output_length": 6, "hash_ids": [0]}`+"\n")
	f.Add(2, "Timestamp,Request tokens,Response tokens\n1,2,3\n\"4\",\"5\",6\n")
	f.Add(3, `{"time":"2025-01-01T00:00:01Z","body":{"a":1},"output_tokens":3}`+"\n")
	f.Fuzz(func(t *testing.T, kind int, in string) {
		formats := Formats()
		format := formats[uint(kind)%uint(len(formats))]
		tr, err := Read(strings.NewReader(in), "fuzz", format, ReadOptions{OnMalformed: Skip, MaxLineBytes: 1 << 12})
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) && !errors.Is(err, ErrCROnly) {
				t.Fatalf("error %v is neither a *LineError nor ErrCROnly", err)
			}
			return
		}
		for i, r := range tr.Records {
			if r.Offset < 0 || r.InputTokens < 0 || r.OutputTokens < 0 || r.Line < 1 {
				t.Fatalf("record %d insane: %+v", i, r)
			}
			if i > 0 && r.Offset < tr.Records[i-1].Offset {
				t.Fatalf("records not sorted at %d", i)
			}
		}
	})
}
