package bench

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// DefaultMaxRequestRecords bounds --output.requests: a run writes at most
// this many records (about 350 bytes each on disk, 60 MB uncompressed;
// a repeat's are held until it ends, so that each says whether it was
// measured), then counts the rest as left out.
const DefaultMaxRequestRecords = 200_000

// RequestRecord is one request of the bench as the client saw it, one JSON
// line of --output.requests: what joins the client's view of a request with
// the server's log (its X-Request-Id). Instants are Unix seconds: the
// scheduled instant's wall clock, and each later one that plus the
// monotonic time since it (so that they agree with the latencies, whatever
// the wall clock does meanwhile); a phase that did not happen is absent.
type RequestRecord struct {
	// ID is the X-Request-Id the request carried: its cell, repeat (and
	// shard), and its arrival's number.
	ID     string `json:"id"`
	Cell   string `json:"cell"`
	Repeat int    `json:"repeat"`
	// Measured: scheduled after the warm-up, so in the cell's figures.
	Measured   bool     `json:"measured"`
	Scheduled  float64  `json:"scheduled"`
	Sent       *float64 `json:"sent,omitempty"`
	FirstToken *float64 `json:"first_token,omitempty"`
	End        *float64 `json:"end,omitempty"`
	// Latencies in seconds from the scheduled instant (TTFT, E2E) and per
	// output token after the first (TPOT), as the cells measure them.
	TTFT         *float64 `json:"ttft,omitempty"`
	TPOT         *float64 `json:"tpot,omitempty"`
	E2E          *float64 `json:"e2e,omitempty"`
	InputTokens  int      `json:"input_tokens"`
	OutputTokens int      `json:"output_tokens"`
	Outcome      string   `json:"outcome"`
	DropReason   string   `json:"drop_reason,omitempty"`
	HTTPStatus   int      `json:"http_status,omitempty"`
	// The engine's own timings of the request, in seconds, each absent
	// when its answer did not give it (server_timings.go), and the client
	// overhead: the TTFT less the engine's queue and TTFT. ServerTimings
	// is the decomposition's result (decomposed, partial, absent) for a
	// request that was sent.
	ServerQueue      *float64 `json:"server_queue,omitempty"`
	ServerTTFT       *float64 `json:"server_ttft,omitempty"`
	ServerGeneration *float64 `json:"server_generation,omitempty"`
	ClientOverhead   *float64 `json:"client_overhead,omitempty"`
	ServerTimings    string   `json:"server_timings,omitempty"`
}

// requestLog writes the run's request records, at most max of them, to a
// file; a name ending in .gz is gzip-compressed. Safe for concurrent use:
// every repeat's observer writes through it.
//
// Every record taken within the bound ends in one of two counts: written
// (the file took it, and the file was then closed without error) or
// dropped (a write error, or a failed close, kept it from the file). The
// report gives both, so that written is what a reader of the file finds.
type requestLog struct {
	mu     sync.Mutex
	path   string
	logger *slog.Logger
	f      *os.File
	file   *countingWriter // the bytes the file took
	gz     *gzip.Writer
	w      *bufio.Writer
	max    int
	taken  int // records within max: written, dropped, or held by a repeat
	// written: records confirmed in the file by a flush; Close moves them
	// to dropped when the file then fails to close.
	written int
	dropped int
	left    int // records beyond max, not written
	err     error
	closed  bool
}

// checkRequestsPath refuses, before any request is sent, a path that is
// not a file the records can be written to without waiting on a reader: a
// FIFO (nothing may read it, and the run would hang on its open or its
// writes), a socket, a directory, a block device. A path that does not
// exist yet is created as a regular file. A character device is written
// as a file is: /dev/null discards the records, and one that fails (the
// ENOSPC of /dev/full) fails the run through its write error.
func checkRequestsPath(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--output.requests=%s: %w", path, err)
	}
	return checkRequestsMode(path, fi.Mode())
}

// checkRequestsMode says why a file of this mode cannot take the records.
func checkRequestsMode(path string, mode fs.FileMode) error {
	var what string
	switch {
	case mode.IsRegular(), mode&fs.ModeCharDevice != 0:
		return nil
	case mode&fs.ModeNamedPipe != 0:
		what = "a FIFO (named pipe): the bench would wait on its reader, and hang when none reads"
	case mode&fs.ModeSocket != 0:
		what = "a socket"
	case mode.IsDir():
		return fmt.Errorf("--output.requests=%s: a directory, not a file: name a file in it, e.g. %s", path, filepath.Join(path, "requests.jsonl"))
	case mode&fs.ModeDevice != 0:
		what = "a block device"
	default:
		what = "not a regular file (" + mode.Type().String() + ")"
	}
	return fmt.Errorf("--output.requests=%s: %s; the records go to a regular file (to follow them as the run writes them, tail -f it)", path, what)
}

// requestWriteTimeout bounds each repeat's write of its records to a file
// that can wait (a terminal): past it the write fails, as a full disk's
// does, rather than stop the run. A regular file takes no deadline.
const requestWriteTimeout = 10 * time.Second

func openRequestLog(path string, max int, logger *slog.Logger) (*requestLog, error) {
	if max < 1 {
		return nil, fmt.Errorf("--output.requests.max=%d: at least 1 record (leave it out for %d)", max, DefaultMaxRequestRecords)
	}
	if err := checkRequestsPath(path); err != nil {
		return nil, err
	}
	// Its folder may be --output.dir, which the reports create later.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("--output.requests: %w", err)
	}
	// Opened without waiting: a FIFO put at the path since the check fails
	// to open (no reader) or opens at once, and is refused below.
	f, err := createNoBlock(path)
	if err != nil {
		return nil, fmt.Errorf("--output.requests: %w", err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkRequestsMode(path, fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	l := &requestLog{path: path, logger: logger, f: f, file: &countingWriter{w: f}, max: max}
	var w io.Writer = l.file
	if strings.HasSuffix(path, ".gz") {
		l.gz = gzip.NewWriter(w)
		w = l.gz
	}
	l.w = bufio.NewWriterSize(w, 64<<10)
	return l, nil
}

// countingWriter counts the bytes its writer took.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// reserve takes room for one record within the bound; false: none is
// left, and the record is counted as left out.
func (l *requestLog) reserve() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.taken >= l.max {
		l.left++
		return false
	}
	l.taken++
	return true
}

// write appends records already reserved, and flushes them to the file
// (through the compressor too: a .gz file decodes up to its last flush),
// so that written counts what the file took. After a write error every
// record is dropped: the file's end is then uncertain.
func (l *requestLog) write(rs []RequestRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(rs) == 0 {
		return
	}
	if l.err != nil || l.closed {
		l.dropped += len(rs)
		return
	}
	// A terminal can wait on its reader: bound the wait. A file that
	// cannot take a deadline (a regular file, /dev/null) does not wait.
	if err := l.f.SetWriteDeadline(time.Now().Add(requestWriteTimeout)); err == nil {
		defer l.f.SetWriteDeadline(time.Time{})
	}
	start := l.file.n
	var ends []int64 // each record's end in the file, uncompressed
	var off int64
	var err error
	for i := range rs {
		b, merr := json.Marshal(&rs[i])
		if merr != nil {
			err = merr
			break
		}
		b = append(b, '\n')
		if _, err = l.w.Write(b); err != nil {
			break
		}
		off += int64(len(b))
		ends = append(ends, off)
	}
	if err == nil {
		err = l.w.Flush()
	}
	if err == nil && l.gz != nil {
		err = l.gz.Flush()
	}
	if err == nil {
		l.written += len(rs)
		return
	}
	// The lines the file took whole are in it; a compressed stream only
	// up to its last flush.
	whole := 0
	if l.gz == nil {
		for _, e := range ends {
			if e <= l.file.n-start {
				whole++
			}
		}
	}
	l.written += whole
	l.dropped += len(rs) - whole
	l.fail(err)
}

// fail keeps the first error, and logs it: the run goes on, and its
// report and exit status say the records are incomplete.
func (l *requestLog) fail(err error) {
	if l.err != nil {
		return
	}
	l.err = err
	l.logger.Error("request records: writing the file failed; the records after this are dropped, and the report and the exit status say so",
		"path", l.path, "err", err, "written", l.written, "dropped", l.dropped)
}

// Close ends the compressed stream, syncs a regular file to disk and
// closes it; it reports the first write error. Records that a failed
// close leaves unconfirmed move from written to dropped. A second Close
// does nothing.
func (l *requestLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.err
	}
	l.closed = true
	// A record taken and never handed to write (a repeat that ended
	// without flushing) is not in the file: dropped.
	l.dropped += l.taken - l.written - l.dropped
	var err error
	if l.err == nil {
		// Every batch was flushed: only the gzip footer remains.
		if l.gz != nil {
			err = l.gz.Close()
		}
		if fi, serr := l.f.Stat(); err == nil && serr == nil && fi.Mode().IsRegular() {
			err = l.f.Sync()
		}
	}
	if cerr := l.f.Close(); err == nil && l.err == nil {
		err = cerr
	}
	if err != nil {
		l.dropped += l.written
		l.written = 0
		l.fail(fmt.Errorf("closing the file: %w", err))
	}
	return l.err
}

// counts returns the records written, those dropped by a write error, and
// those left out beyond the bound.
func (l *requestLog) counts() (written, dropped, left int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.written, l.dropped, l.left
}

// observer records the requests of one repeat: their ids are prefix-Seq,
// as the runner named them. It holds them until flush, which marks those
// scheduled from the warm-up's end on as measured and writes them.
func (l *requestLog) observer(cell string, repeat int, prefix string) *requestRecorder {
	return &requestRecorder{log: l, cell: cell, repeat: repeat, prefix: prefix}
}

type requestRecorder struct {
	log    *requestLog
	cell   string
	repeat int
	prefix string

	mu   sync.Mutex
	recs []RequestRecord
}

var _ workload.Observer = (*requestRecorder)(nil)

// flush writes the repeat's records, those scheduled at or after
// warmupEnd marked measured.
func (r *requestRecorder) flush(warmupEnd time.Time) {
	w := float64(warmupEnd.UnixNano()) / 1e9
	r.write(func(rec *RequestRecord) bool { return rec.Scheduled >= w })
}

// flushInterrupted writes the records of a repeat that an interrupt cut
// short, none of them measured: the repeat is in no cell's figures. Its
// requests were sent all the same, so their records join the server's
// log as the others do, and written counts them.
func (r *requestRecorder) flushInterrupted() {
	r.write(func(*RequestRecord) bool { return false })
}

func (r *requestRecorder) write(measured func(*RequestRecord) bool) {
	r.mu.Lock()
	recs := r.recs
	r.recs = nil
	r.mu.Unlock()
	for i := range recs {
		recs[i].Measured = measured(&recs[i])
	}
	r.log.write(recs)
}

func (*requestRecorder) Sent(*observation.Request)       {}
func (*requestRecorder) FirstToken(*observation.Request) {}
func (*requestRecorder) Token(*observation.Request)      {}
func (r *requestRecorder) Done(o *observation.Request)   { r.record(o) }
func (r *requestRecorder) Dropped(o *observation.Request) {
	r.record(o)
}

func (r *requestRecorder) record(o *observation.Request) {
	// Every instant is the scheduled instant's wall clock plus the
	// monotonic time since it, as the latencies are measured, so that a
	// record's instants agree with its own latencies. Each time.Now reads
	// the wall clock and the monotonic clock one after the other: a
	// thread descheduled between the two reads, or a wall clock stepped
	// (by NTP, by the hypervisor) during the request, set end - scheduled
	// apart from e2e (by 1.2 ms in a 23 ms request, once, on a busy CI
	// machine). Each record keeps the wall clock of its request's
	// scheduling, which joins it with the server's log.
	base := o.Scheduled
	unix := func(t time.Time) *float64 {
		if t.IsZero() {
			return nil
		}
		v := float64(base.UnixNano()+int64(t.Sub(base))) / 1e9
		return &v
	}
	secs := func(d time.Duration, ok bool) *float64 {
		if !ok {
			return nil
		}
		v := d.Seconds()
		return &v
	}
	if !r.log.reserve() {
		return
	}
	rec := RequestRecord{
		ID: fmt.Sprintf("%s-%d", r.prefix, o.Seq), Cell: r.cell, Repeat: r.repeat,
		Scheduled: *unix(o.Scheduled), Sent: unix(o.Sent), FirstToken: unix(o.FirstToken), End: unix(o.End),
		TTFT: secs(o.TTFT()), InputTokens: o.PromptTokens, OutputTokens: o.OutputTokens,
		Outcome: string(o.Outcome), DropReason: o.DropReason, HTTPStatus: o.HTTPStatus,
	}
	if o.Outcome == observation.Success {
		rec.TPOT, rec.E2E = secs(o.TPOT()), secs(o.E2E())
	}
	if o.Outcome == observation.Dropped {
		rec.ID = "" // never sent: no id went out
	}
	setServerFields(&rec, o)
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}
