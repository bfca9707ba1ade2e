package replay

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
)

// Fuzzing each reader: bytes in, no panic, and what a read holds and
// allocates is bounded by its input. Run one with
//
//	go test -run '^$' -fuzz FuzzAzureReader -fuzztime 60s -parallel 1 ./probe/replay/

// fuzzRead caps what one fuzzed read may hold.
var fuzzRead = ReadOptions{OnMalformed: Skip, MaxLineBytes: 1 << 12, MaxRecords: 1 << 10}

// What a read of n bytes in m lines may allocate in all (not only keep):
// allocBase for the line reader's buffer and the like, allocPerLine for
// each line's decoder and error message, allocPerByte for the copies of
// each byte (a line, its fields, a body, a record's share of the records
// slice as it grows). A reader that allocates in proportion to a number it
// read (a prompt length, a count of hash ids) breaks the bound at once: a
// 20-byte line asking for 10^15 of anything.
const (
	allocBase    = 1 << 20
	allocPerLine = 8 << 10
	allocPerByte = 64
)

// A fuzzed trace has its first fuzzPrompts prompts of at most
// fuzzPromptTokens synthesised (longer ones are bounded by maxTokens, which
// TestSourceBounds checks): few and short, so that an execution stays fast
// and the fuzzer, which minimises every new input, keeps going.
const (
	fuzzPrompts      = 4
	fuzzPromptTokens = 1 << 10
)

func FuzzAzureReader(f *testing.F) {
	fuzzReader(f, FormatAzure, seedLines(f, "testdata/azure_code_2023_slice.csv", 3),
		twoRecords[FormatAzure],
		"\ufeffGeneratedTokens,TIMESTAMP,ContextTokens\r\n5,2024-05-10 00:00:00.009930+00:00,100\r\n\r\n6,2024-05-10 00:00:01.5+00:00,200\r\n",
		strings.ReplaceAll(twoRecords[FormatAzure], "\n", "\r"),
		"TIMESTAMP,ContextTokens,GeneratedTokens\n\"2023-11-16 18:17:03\",\"1\",\"2\"\nyesterday,1,1\n2023-11-16 18:17:04,-5,5\n9999-01-01 00:00:00,1,1\n")
}

func FuzzBurstGPTReader(f *testing.F) {
	fuzzReader(f, FormatBurstGPT, twoRecords[FormatBurstGPT],
		"Timestamp,Request tokens,Response tokens\n1,2,3\n\"4\",\"5\",6\n1e300,1,1\nNaN,1,1\n7,1048577,1\n",
		"\ufeffTimestamp,Model,Request tokens,Response tokens\r\n0.5,\"a,\"\"b\"\"\",1,2\r\n",
		strings.ReplaceAll(twoRecords[FormatBurstGPT], "\n", "\r"))
}

func FuzzMooncakeReader(f *testing.F) {
	fuzzReader(f, FormatMooncake, seedLines(f, "testdata/mooncake_fast25_slice.jsonl", 2),
		twoRecords[FormatMooncake],
		"\ufeff"+twoRecords[FormatMooncake],
		`{"timestamp": 1e300, "input_length": 1000000000000000, "output_length": -1, "hash_ids": [1, 2, 3]}`+"\n"+
			`{"timestamp": 0, "input_length": 2, "output_length": 1, "hash_ids": [1, 2, 3]}`+"\n{not json\n",
		strings.ReplaceAll(twoRecords[FormatMooncake], "\n", "\r"))
}

func FuzzJSONLReader(f *testing.F) {
	fuzzReader(f, FormatJSONL, twoRecords[FormatJSONL],
		"\ufeff"+`{"time":"2025-01-01T00:00:01.5Z","method":"POST","path":"/v1/completions","status":200,"body":{"prompt":"a b"},"output_tokens":7,"redacted":true}`+"\n"+
			`{"time":"2025-01-01T00:00:01Z","body":{"a":1}}`+"\n",
		`{"offset":9223372036.854776,"body":{}}`+"\n"+`{"offset":1,"body":{},"output_tokens":1000000000000000}`+"\n"+`{"time":"9999-01-01T00:00:00Z","body":{}}`+"\n",
		strings.ReplaceAll(twoRecords[FormatJSONL], "\n", "\r"))
}

// seedLines is the first line of a test trace (a CSV header) and its
// first n other lines of at most 160 bytes. Seeds are kept short: the
// fuzzer minimises every new input it finds, in time quadratic in its
// length.
func seedLines(f *testing.F, path string, n int) string {
	fh, err := os.Open(path)
	if err != nil {
		f.Fatal(err)
	}
	defer fh.Close()
	var b strings.Builder
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<20)
	for i := 0; i <= n && sc.Scan(); {
		if line := sc.Text(); i == 0 || len(line) <= 160 {
			b.WriteString(line + "\n")
			i++
		}
	}
	return b.String()
}

func fuzzReader(f *testing.F, format Format, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		lines := bytes.Count(in, []byte("\n")) + 1
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		tr, err := Read(bytes.NewReader(in), "fuzz", format, fuzzRead)
		runtime.ReadMemStats(&after)
		if alloc, limit := after.TotalAlloc-before.TotalAlloc, uint64(allocBase+allocPerLine*lines+allocPerByte*len(in)); alloc > limit {
			t.Fatalf("reading %d bytes in %d lines allocated %d bytes, over %d", len(in), lines, alloc, limit)
		}
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) && !errors.Is(err, ErrCROnly) {
				t.Fatalf("error %v is neither a *LineError nor ErrCROnly", err)
			}
			checkErrorSize(t, err)
			return
		}
		if len(tr.Records) > lines || len(tr.Records) > fuzzRead.MaxRecords {
			t.Fatalf("%d records from %d lines (at most %d)", len(tr.Records), lines, fuzzRead.MaxRecords)
		}
		if len(tr.Errors) > MaxKeptErrors || tr.Skipped < len(tr.Errors) || tr.Skipped+len(tr.Records) > lines {
			t.Fatalf("%d errors kept, %d skipped, %d records, %d lines", len(tr.Errors), tr.Skipped, len(tr.Records), lines)
		}
		for _, err := range tr.Errors {
			checkErrorSize(t, err)
		}
		for i, r := range tr.Records {
			if r.Offset < 0 || r.Offset > maxTime.Sub(minTime) || r.InputTokens < 0 || r.InputTokens > maxTokens ||
				r.OutputTokens < 0 || r.OutputTokens > maxTokens || len(r.HashIDs) > r.InputTokens && r.Body == nil ||
				len(r.Body) > len(in) || r.Line < 1 || r.Line > lines {
				t.Fatalf("record %d insane: %+v", i, r)
			}
			if i > 0 && r.Offset < tr.Records[i-1].Offset {
				t.Fatalf("records not sorted at %d", i)
			}
		}

		// What the Source makes of it: a schedule that increases, and
		// prompts of exactly their length.
		for _, chat := range []bool{false, true} {
			s, err := NewSource(tr, Options{Flavor: flavorOf(chat), OnUnreplayable: Skip, Speed: 1000})
			if err != nil {
				if !errors.Is(err, ErrNoRecords) {
					t.Fatalf("source: %v", err)
				}
				continue
			}
			last, prompts := int64(-1), 0
			for range 16 {
				off, ok := s.Schedule().Next()
				if !ok {
					break
				}
				if int64(off) <= last {
					t.Fatalf("offset %v after %v", off, last)
				}
				last = int64(off)
				rec := s.cur.rec
				if rec.Body != nil || rec.InputTokens > fuzzPromptTokens || prompts >= fuzzPrompts {
					continue
				}
				prompts++
				p := s.Prompts().Next()
				before, after := s.synth.template()
				if n := len(strings.Fields(p.Text)); n != rec.InputTokens-before-after || p.InputTokens != rec.InputTokens {
					t.Fatalf("prompt of %d words for %d tokens", n, rec.InputTokens)
				}
			}
		}
	})
}

// checkErrorSize: an error is its file and line and a bounded reason.
func checkErrorSize(t *testing.T, err error) {
	t.Helper()
	if n := len(err.Error()); n > maxReason+64 {
		t.Fatalf("error of %d bytes: %.300s", n, err)
	}
}
