package prober

import (
	"net/http"
	"sync"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// fakeSpans hands out sampled trace contexts and keeps what ended.
type fakeSpans struct {
	mu     sync.Mutex
	issued []observation.Trace
	ended  []observation.Request
}

func (f *fakeSpans) Trace() observation.Trace {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := observation.Trace{TraceID: [16]byte{byte(len(f.issued) + 1)}, SpanID: [8]byte{1}, Sampled: true}
	f.issued = append(f.issued, t)
	return t
}

func (f *fakeSpans) Done(o *observation.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = append(f.ended, *o)
}

// TestProbeSpans: with Spans set, every request of a probe is sent with a
// trace context of its own (the client sends it as traceparent) and its
// span is told of its end, the observation carrying that context; the
// target and module are the probe's.
func TestProbeSpans(t *testing.T) {
	url, _, _ := startSim(t, instantSim())
	e := newEnv(t, loadConfig(t, simConfig, url), nil)
	spans := &fakeSpans{}
	var gotTarget config.Target
	var gotModule string
	e.h.opts.Spans = func(tg *config.Target, module string, _ config.Sampling) Spans {
		gotTarget, gotModule = *tg, module
		return spans
	}
	if code, body := e.scrape(t, "chat", url, "10", false); code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	spans.mu.Lock()
	defer spans.mu.Unlock()
	if len(spans.issued) != 3 || len(spans.ended) != 3 {
		t.Fatalf("%d trace contexts issued, %d spans ended; want 3 and 3", len(spans.issued), len(spans.ended))
	}
	seen := map[observation.Trace]bool{}
	for _, o := range spans.ended {
		if !o.Trace.Valid() || !o.Trace.Sampled || seen[o.Trace] || o.Outcome != observation.Success || o.RequestID == "" {
			t.Errorf("ended %+v", o)
		}
		seen[o.Trace] = true
	}
	if gotModule != "chat" || gotTarget.URL == "" || gotTarget.Model == "" {
		t.Errorf("spans asked for module %q, target %+v", gotModule, gotTarget)
	}
}
