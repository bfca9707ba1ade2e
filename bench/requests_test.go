package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

// TestRequestRecords: --output.requests writes one record per request of
// the run, gzip-compressed for a .gz name: as many measured records as
// each cell's measured requests, every record's id the X-Request-Id the
// server received (unique over the run: cell, repeat, arrival), latencies
// that agree with the record's own instants, and the bound: with
// --output.requests.max=5 five are written and the rest counted as left
// out in report.json. The warm-up is held at its configured 300 ms
// (max_warmup), so that the two runs send the same requests.
func TestRequestRecords(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	st := startSim(t, 5*time.Millisecond, 1, 0)
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "b.yml", targetsYAML([]string{"sim"}, []*simTarget{st})+`
bench:
  matrix:
    process: constant
    rates: [10, 20]
    shapes: [{name: s, input_tokens: 16, output_tokens: 4}]
  warmup: 300ms
  max_warmup: 300ms
  duration: 1s
  repeats: 2
  prompt_set_size: 20
  stability: {enabled: false}
  sampling: {ignore_eos: true}
  ranking: {resamples: 100}
`)
	out := filepath.Join(dir, "out")
	file := filepath.Join(dir, "not-yet", "requests.jsonl.gz") // its folder is made
	if code, so, se := runCLI(t, context.Background(), "bench", "--config.file="+cfg, "--output.dir="+out, "--output.requests="+file); code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, so, se)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	var recs []RequestRecord
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		var r RequestRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	rep := readReport(t, out)
	measured := map[string]int{}
	var ids []string
	for _, r := range recs {
		if r.Measured {
			measured[r.Cell]++
		}
		if r.ID != "" {
			ids = append(ids, r.ID)
		}
		if r.E2E != nil && r.End != nil && (*r.E2E-(*r.End-r.Scheduled)) > 1e-6 {
			t.Errorf("record %s: e2e %v, end - scheduled %v", r.ID, *r.E2E, *r.End-r.Scheduled)
		}
		if r.Outcome == "success" && (r.TTFT == nil || r.TPOT == nil || r.OutputTokens != 4) {
			t.Errorf("record %+v: a success without its latencies or tokens", r)
		}
	}
	for _, c := range rep.Cells {
		want := 0
		for _, rr := range c.Repeats {
			want += rr.Stats.Requests
		}
		if measured[c.Key] != want {
			t.Errorf("cell %s: %d measured records, the repeats measured %d requests", c.Key, measured[c.Key], want)
		}
	}
	got := st.requestIDs()
	slices.Sort(ids)
	slices.Sort(got)
	if len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Error("request ids repeat within the run")
	}
	if !slices.Equal(ids, got) {
		t.Errorf("%d record ids, the server received %d X-Request-Id; first %v vs %v", len(ids), len(got), ids[:min(3, len(ids))], got[:min(3, len(got))])
	}
	if rr := rep.RequestRecords; rr == nil || rr.Written != len(recs) || rr.LeftOut != 0 {
		t.Errorf("report request_records %+v, %d records in the file", rr, len(recs))
	}
	t.Logf("%d records, %d ids; %v measured per cell", len(recs), len(ids), measured)

	// The bound.
	out2 := filepath.Join(dir, "out2")
	file2 := filepath.Join(dir, "requests.jsonl")
	if code, so, se := runCLI(t, context.Background(), "bench", "--config.file="+cfg, "--output.dir="+out2, "--output.requests="+file2, "--output.requests.max=5"); code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, so, se)
	}
	b, err := os.ReadFile(file2)
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, c := range b {
		if c == '\n' {
			lines++
		}
	}
	if rr := readReport(t, out2).RequestRecords; lines != 5 || rr == nil || rr.Written != 5 || rr.LeftOut != len(recs)-5 {
		t.Errorf("bound 5: %d lines, report %+v, want 5 written and %d left out", lines, rr, len(recs)-5)
	}
}

// TestRequestRecordsMax: --output.requests.max is a whole number of at
// least 1, read as an integer: 0 and -1 are refused (they became 1), and
// so are 1.5 and 1e30 and a number beyond the int's range (kingpin's int
// went through a float, and made of them 1 and an arbitrary number), each
// with the flag's name and why; the default is DefaultMaxRequestRecords.
// An Options.RequestsMax below 0 is refused by Run too.
func TestRequestRecordsMax(t *testing.T) {
	cases := []struct {
		arg  string // "": the flag left out
		want int
		err  string // part of the refusal
	}{
		{"", DefaultMaxRequestRecords, ""},
		{"7", 7, ""},
		{"9223372036854775807", math.MaxInt, ""},
		{"0", 0, "at least 1"},
		{"-1", 0, "at least 1"},
		{"1.5", 0, "not a whole number"},
		{"1e30", 0, "not a whole number"},
		{"99999999999999999999", 0, "beyond"},
		{"many", 0, "not a whole number"},
	}
	for _, tc := range cases {
		t.Run(cmp.Or(tc.arg, "default"), func(t *testing.T) {
			app := kingpin.New("infer_exporter", "")
			var stdout, stderr bytes.Buffer
			addCommand(app, false, &stdout, &stderr)
			args := []string{"bench", "--output.requests=r.jsonl"}
			if tc.arg != "" {
				args = append(args, "--output.requests.max="+tc.arg)
			}
			_, err := app.Parse(args)
			got, _ := strconv.Atoi(app.GetCommand("bench").GetCommand("run").GetFlag("output.requests.max").Model().Value.String())
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err == "" && got != tc.want:
				t.Errorf("max %d, want %d", got, tc.want)
			case tc.err != "" && err == nil:
				t.Errorf("accepted as %d", got)
			case tc.err != "" && (!strings.Contains(err.Error(), "output.requests.max") || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %q: want the flag's name and %q", err, tc.err)
			}
		})
	}
	if _, err := openRequestLog(filepath.Join(t.TempDir(), "r.jsonl"), -1, nil); err == nil || !strings.Contains(err.Error(), "at least 1") {
		t.Errorf("RequestsMax -1: %v", err)
	}
}
