//go:build unix

package bench

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// recordsYAML is a bench of one cell of one short repeat: enough requests
// to write, in about two seconds.
func recordsYAML(names []string, sims []*simTarget) string {
	return targetsYAML(names, sims) + `
bench:
  matrix:
    process: constant
    rates: [10]
    shapes: [{name: s, input_tokens: 16, output_tokens: 4}]
  warmup: 200ms
  duration: 1s
  repeats: 1
  prompt_set_size: 10
  stability: {enabled: false}
  ranking: {resamples: 100}
`
}

// benchRun is what one bench command gave: its exit code, its console and
// its log.
type benchRun struct {
	code                 int
	stdout, stderr, logs string
}

// runBenchWithin runs the bench command as runCLI does, with its log kept
// (text), and fails the test when it has not ended within limit: a hang is
// a failure of its own, not the suite's timeout. stderr, when set, also
// gets the command's stderr (an interrupt's trigger).
func runBenchWithin(t *testing.T, ctx context.Context, limit time.Duration, stderr io.Writer, args ...string) benchRun {
	t.Helper()
	app := kingpin.New("infer_exporter", "")
	var stdout, errs, logs testenv.Buffer
	var errOut io.Writer = &errs
	if stderr != nil {
		errOut = io.MultiWriter(&errs, stderr)
	}
	_, run := addCommand(app, false, &stdout, errOut)
	if _, err := app.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	done := make(chan int, 1)
	go func() { done <- run(ctx, slog.New(slog.NewTextHandler(&logs, nil))) }()
	select {
	case code := <-done:
		return benchRun{code: code, stdout: stdout.String(), stderr: errs.String(), logs: logs.String()}
	case <-time.After(limit):
		t.Fatalf("the bench had not ended after %s\nstderr: %s\nlog: %s", limit, errs.String(), logs.String())
		return benchRun{}
	}
}

// recordLines reads the records of a file (gzip-decoded for .gz), and
// fails the test on a line that is not a record.
func recordLines(t *testing.T, path string) []RequestRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("%s: not gzip: %v", path, err)
		}
		r = zr
	}
	var recs []RequestRecord
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var rec RequestRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: line %d %q: %v", path, len(recs)+1, sc.Text(), err)
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return recs
}

// TestRequestRecordsRefusedPaths: an --output.requests path that is not a
// file the records can be written to without waiting on a reader (a FIFO,
// which hung the bench at its end, a symbolic link to one, a socket, a
// directory) is refused at once, before any request is sent, with exit 1
// and an error that names the path, says what it is and what to give
// instead.
func TestRequestRecordsRefusedPaths(t *testing.T) {
	cases := []struct {
		name string
		// make puts the thing at path.
		make func(t *testing.T, path string)
		want []string
	}{
		{"fifo", func(t *testing.T, path string) { mkfifo(t, path) },
			[]string{"a FIFO", "regular file", "tail -f"}},
		{"symlink to a fifo", func(t *testing.T, path string) {
			mkfifo(t, path+".fifo")
			if err := os.Symlink(path+".fifo", path); err != nil {
				t.Fatal(err)
			}
		}, []string{"a FIFO"}},
		{"fifo with a reader", func(t *testing.T, path string) {
			// A reader that never reads: the writes would fill the pipe
			// and wait.
			mkfifo(t, path)
			r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
		}, []string{"a FIFO"}},
		{"socket", func(t *testing.T, path string) {
			l, err := net.Listen("unix", path)
			if err != nil {
				t.Skipf("no unix socket here: %v", err)
			}
			t.Cleanup(func() { l.Close() })
		}, []string{"a socket", "regular file"}},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, []string{"a directory", "requests.jsonl"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sim := startSim(t, 5*time.Millisecond, 1, 0)
			// A short folder: a unix socket's path is at most 108 bytes.
			dir, err := os.MkdirTemp("", "rec")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			path := filepath.Join(dir, "r")
			tc.make(t, path)
			out := filepath.Join(dir, "out")
			res := runBenchWithin(t, context.Background(), 20*time.Second, nil, "bench",
				"--config.file="+writeTestFile(t, dir, "b.yml", recordsYAML([]string{"sim"}, []*simTarget{sim})),
				"--output.dir="+out, "--output.requests="+path)
			if res.code != ExitError {
				t.Errorf("exit %d, want %d\n%s", res.code, ExitError, res.stderr)
			}
			for _, w := range append([]string{"--output.requests=" + path}, tc.want...) {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr %q: no %q", res.stderr, w)
				}
			}
			if ids := sim.requestIDs(); len(ids) > 0 {
				t.Errorf("%d requests sent before the refusal", len(ids))
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("a report was written for a run refused at its start")
			}
			// Run refuses it too (its open does not wait on a FIFO either).
			opened := make(chan error, 1)
			go func() {
				l, err := openRequestLog(path, 1, nil)
				if err == nil {
					l.Close()
				}
				opened <- err
			}()
			select {
			case err := <-opened:
				if err == nil || !strings.Contains(err.Error(), tc.want[0]) {
					t.Errorf("openRequestLog: %v, want %q", err, tc.want[0])
				}
			case <-time.After(20 * time.Second):
				t.Fatal("openRequestLog had not returned after 20 s")
			}
		})
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
}

// TestRequestRecordsWritten: report.json's request_records.written is the
// number of records the file holds, and a write error (the ENOSPC of
// /dev/full) is logged, said in report.md and on stderr, counts the
// records as dropped, and exits 1 after the report is written. /dev/null
// (a character device) is accepted: its records are written, to nowhere.
func TestRequestRecordsWritten(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	testenv.Slow(t, "real time: four benches of about 2 s")
	cases := []struct {
		name string
		path func(dir string) string
		// lines: the file can be read back (written == its lines).
		lines bool
		fails bool
	}{
		{"regular file", func(dir string) string { return filepath.Join(dir, "r.jsonl") }, true, false},
		{"gzip", func(dir string) string { return filepath.Join(dir, "r.jsonl.gz") }, true, false},
		{"dev null", func(string) string { return os.DevNull }, false, false},
		{"dev full", func(string) string { return "/dev/full" }, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := tc.path(dir)
			if _, err := os.Stat(path); !tc.lines && err != nil {
				t.Skipf("%s: %v", path, err)
			}
			sim := startSim(t, 5*time.Millisecond, 1, 0)
			out := filepath.Join(dir, "out")
			res := runBenchWithin(t, context.Background(), 60*time.Second, nil, "bench",
				"--config.file="+writeTestFile(t, dir, "b.yml", recordsYAML([]string{"sim"}, []*simTarget{sim})),
				"--output.dir="+out, "--output.requests="+path)
			rep := readReport(t, out) // written whatever the records met
			rr := rep.RequestRecords
			if rr == nil {
				t.Fatal("report.json has no request_records")
			}
			sent := len(sim.requestIDs())
			if sent == 0 {
				t.Fatal("no request reached the server")
			}
			md, err := os.ReadFile(filepath.Join(out, render.MarkdownFile))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.fails {
				if res.code != ExitOK || rr.Error != "" || rr.Dropped != 0 {
					t.Fatalf("exit %d, request_records %+v\n%s", res.code, rr, res.stderr)
				}
				// Every request sent has its record (a dropped arrival,
				// never sent, would add one).
				if rr.Written < sent || rr.LeftOut != 0 {
					t.Errorf("request_records %+v, %d requests sent", rr, sent)
				}
				if tc.lines {
					if recs := recordLines(t, path); len(recs) != rr.Written {
						t.Errorf("%d records in %s, report.json says %d written", len(recs), path, rr.Written)
					}
				}
				if !bytes.Contains(md, []byte("## Request records")) || bytes.Contains(md, []byte("INCOMPLETE")) {
					t.Errorf("report.md's request records:\n%s", md)
				}
				return
			}
			if res.code != ExitError {
				t.Errorf("exit %d, want %d (a write error)\n%s", res.code, ExitError, res.stderr)
			}
			if rr.Written != 0 || rr.Dropped < sent || !strings.Contains(rr.Error, "no space left") {
				t.Errorf("request_records %+v, want none written, the %d sent dropped, and the error", rr, sent)
			}
			if !strings.Contains(res.logs, "level=ERROR") || !strings.Contains(res.logs, "request records") || !strings.Contains(res.logs, "no space left") {
				t.Errorf("the write error is not logged:\n%s", res.logs)
			}
			if !strings.Contains(res.stderr, "--output.requests=/dev/full") || !strings.Contains(res.stderr, "dropped") {
				t.Errorf("stderr %q: no word of the records", res.stderr)
			}
			if !bytes.Contains(md, []byte("**REQUEST RECORDS INCOMPLETE**")) || !bytes.Contains(md, []byte("no space left")) {
				t.Errorf("report.md does not say the records failed:\n%s", md)
			}
		})
	}
}

// TestRequestRecordsInterrupted: the records of a repeat cut short by an
// interrupt are written (its requests were sent: their records join the
// server's log), none of them measured, so that written is still the
// file's lines and every request the server received has its record.
func TestRequestRecordsInterrupted(t *testing.T) {
	testenv.Slow(t, "real time: a bench of two cells, interrupted in its second")
	sim := startSim(t, 5*time.Millisecond, 1, 0)
	dir := t.TempDir()
	out, path := filepath.Join(dir, "out"), filepath.Join(dir, "r.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The interrupt comes once the server has received a request of the
	// second cell's repeat: while it runs, whatever the machine's speed.
	go func() {
		for ctx.Err() == nil {
			for _, id := range sim.requestIDs() {
				if strings.HasPrefix(id, "second/") {
					cancel()
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	res := runBenchWithin(t, ctx, 60*time.Second, nil, "bench",
		"--config.file="+writeTestFile(t, dir, "b.yml", recordsYAML([]string{"first", "second"}, []*simTarget{sim, sim})),
		"--output.dir="+out, "--output.requests="+path)
	if res.code != ExitError {
		t.Errorf("exit %d, want %d (interrupted)\n%s", res.code, ExitError, res.stderr)
	}
	rep := readReport(t, out)
	if !rep.Interrupted || len(rep.Cells) != 1 {
		t.Fatalf("interrupted %v with %d cells: the interrupt missed the second cell", rep.Interrupted, len(rep.Cells))
	}
	recs := recordLines(t, path)
	if rr := rep.RequestRecords; rr == nil || rr.Written != len(recs) || rr.Dropped != 0 || rr.Error != "" {
		t.Fatalf("request_records %+v, %d records in the file", rr, len(recs))
	}
	cut := 0
	for _, r := range recs {
		if r.Cell == "second/rate=10/s" {
			cut++
			if r.Measured {
				t.Errorf("record %s of the interrupted repeat is marked measured", r.ID)
			}
		}
	}
	ids := map[string]bool{}
	for _, r := range recs {
		ids[r.ID] = true
	}
	for _, id := range sim.requestIDs() {
		if !ids[id] {
			t.Errorf("request %s reached the server and has no record", id)
		}
	}
	if cut == 0 {
		t.Error("no record of the interrupted repeat")
	}
	t.Logf("%d records, %d of the interrupted repeat", len(recs), cut)
}
