package bench

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
// the server's log (its X-Request-Id). Instants are Unix seconds; a phase
// that did not happen is absent.
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
}

// requestLog writes the run's request records, at most max of them, to a
// file; a name ending in .gz is gzip-compressed. Safe for concurrent use:
// every repeat's observer writes through it.
type requestLog struct {
	mu      sync.Mutex
	f       *os.File
	gz      *gzip.Writer
	w       *bufio.Writer
	max     int
	written int
	left    int // records beyond max, not written
	err     error
}

func openRequestLog(path string, max int) (*requestLog, error) {
	// Its folder may be --output.dir, which the reports create later.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("--output.requests: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--output.requests: %w", err)
	}
	l := &requestLog{f: f, max: max}
	var w io.Writer = f
	if strings.HasSuffix(path, ".gz") {
		l.gz = gzip.NewWriter(f)
		w = l.gz
	}
	l.w = bufio.NewWriterSize(w, 64<<10)
	return l, nil
}

// reserve takes room for one record within the bound; false: none is
// left, and the record is counted as left out.
func (l *requestLog) reserve() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.written >= l.max {
		l.left++
		return false
	}
	l.written++
	return true
}

// write appends records already reserved.
func (l *requestLog) write(rs []RequestRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range rs {
		if l.err != nil {
			return
		}
		b, err := json.Marshal(&rs[i])
		if err != nil {
			l.err = err
			return
		}
		l.w.Write(b)
		if err := l.w.WriteByte('\n'); err != nil {
			l.err = err
		}
	}
}

// Close flushes and closes the file; it reports the first write error.
func (l *requestLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.err
	err = errors.Join(err, l.w.Flush())
	if l.gz != nil {
		err = errors.Join(err, l.gz.Close())
	}
	return errors.Join(err, l.f.Close())
}

// counts returns the records written and those left out beyond the bound.
func (l *requestLog) counts() (written, left int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.written, l.left
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
	r.mu.Lock()
	recs := r.recs
	r.recs = nil
	r.mu.Unlock()
	w := float64(warmupEnd.UnixNano()) / 1e9
	for i := range recs {
		recs[i].Measured = recs[i].Scheduled >= w
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
	unix := func(t time.Time) *float64 {
		if t.IsZero() {
			return nil
		}
		v := float64(t.UnixNano()) / 1e9
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
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}
