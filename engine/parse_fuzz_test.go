package engine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"
)

// referenceParse is the parse before parse.go: expfmt over the whole body,
// with the missing last newline added.
func referenceParse(body []byte) (map[string]*dto.MetricFamily, error) {
	if len(body) > 0 && body[len(body)-1] != '\n' {
		body = append(body[:len(body):len(body)], '\n')
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(bytes.NewReader(body))
}

// wantedOf is the reference's families that parse.go keeps.
func wantedOf(fams map[string]*dto.MetricFamily) map[string]*dto.MetricFamily {
	out := map[string]*dto.MetricFamily{}
	for n, mf := range fams {
		if _, ok := wanted[n]; ok {
			out[n] = mf
		}
	}
	return out
}

// hasQuirk: a line starting with '{' is read by expfmt with the family of
// the line before it in hand (readingLabels and startLabelValue look at its
// type before the name inside the braces is read), so dropping that line
// can change how the parser reads a wanted histogram or summary written
// that way, or a label named quantile or le before the name. parse.go
// accepts this; no exporter writes such lines.
func hasQuirk(body []byte) bool {
	for _, l := range bytes.Split(body, []byte("\n")) {
		if t := bytes.TrimLeft(l, " \t"); len(t) > 0 && t[0] == '{' {
			return true
		}
	}
	return false
}

// checkAgainstReference is the differential check: what parse.go keeps of
// a body is what expfmt makes of it, for the families kept.
func checkAgainstReference(t *testing.T, body []byte) {
	t.Helper()
	if len(body) > maxMetricsBytes {
		return
	}
	got, err := parseMetricsBody(context.Background(), bytes.NewReader(body))
	ref, refErr := referenceParse(body)
	quirk := hasQuirk(body)
	var pe, refPE expfmt.ParseError
	switch {
	case refErr == nil && err == nil:
		w := wantedOf(ref)
		if len(w) != len(got.fams) {
			if !quirk {
				t.Fatalf("kept %d families, the reference has %d of the wanted ones:\n%q", len(got.fams), len(w), body)
			}
			return
		}
		for n, mf := range w {
			if !proto.Equal(mf, got.fams[n]) && !quirk {
				t.Fatalf("family %s differs:\ngot  %v\nwant %v\nbody %q", n, got.fams[n], mf, body)
			}
		}
		if e := detectEngine(ref); e != got.engine && !quirk {
			t.Fatalf("engine %q, the reference's names give %q:\n%q", got.engine, e, body)
		}
	case refErr == nil && errors.Is(err, errRefused):
		// A refusal must be for a real duplicate or a cap.
		if strings.Contains(err.Error(), "duplicate series") && duplicateSeries(wantedOf(ref)) == nil && !quirk {
			t.Fatalf("refused as duplicate, the reference has none: %v\n%q", err, body)
		}
	case refErr == nil:
		if !quirk {
			t.Fatalf("error %v; the reference parses it:\n%q", err, body)
		}
	case err == nil:
		// Only an error in a dropped line, which needs a family's state
		// (a second TYPE, a repeated label name, a histogram's le) or is
		// past the piece of a long line, may go unseen.
		if errors.As(refErr, &refPE) {
			for _, l := range got.keptLines {
				if l == refPE.Line && !quirk {
					t.Fatalf("the reference fails in kept line %d (%v), parse.go does not:\n%q", l, refErr, body)
				}
			}
		}
	case errors.As(err, &pe) && errors.As(refErr, &refPE):
		// The first error among the kept lines is at or after the body's
		// first.
		if pe.Line < refPE.Line && !quirk {
			t.Fatalf("error at line %d (%v), before the reference's at %d (%v):\n%q", pe.Line, err, refPE.Line, refErr, body)
		}
	}
}

// FuzzParseMetrics: the stream reader never panics, bounds what it keeps,
// and agrees with expfmt on the families it keeps. Seeded from the
// recorded scrapes and hand-written lines of every shape the lexer reads.
//
//	go test -run '^$' -fuzz FuzzParseMetrics -fuzztime 60s ./engine/
func FuzzParseMetrics(f *testing.F) {
	// The recorded scrapes, in pieces of about 2 KiB cut at lines: the
	// fuzzer minimises every input that finds new coverage, and doing so
	// for a whole 28 KB file stalls it for minutes.
	files, _ := filepath.Glob("testdata/server/metrics_*.txt")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for len(b) > 0 {
			n := min(len(b), 2048)
			if i := bytes.IndexByte(b[n-1:], '\n'); i >= 0 {
				n += i
			} else {
				n = len(b)
			}
			f.Add(b[:n])
			b = b[n:]
		}
	}
	for _, s := range []string{
		"vllm:num_requests_running 3\nvllm:num_requests_running 4\n",
		"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\",engine=\"0\"} 3 1700000000000\n",
		`{"vllm:num_requests_running",model_name="m"} 1` + "\n",
		`{model_name="m","vllm:num_requests_running"} 1` + "\n",
		"# TYPE nv_inference_pending_request histogram\nnv_inference_pending_request_count 4\nnv_inference_pending_request_count{model=\"a\"} 2\n",
		"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7e9\nfoo{a=\"\\\"x\\n\"} NaN\n",
		"<html><body>Not Found</body></html>\n",
		"Not Found\n",
		"# HELP tgi_queue_size a \\q\ntgi_queue_size 1\n",
		"# TYPE sglang:token_usage hıstogram\nsglang:token_usage_bucket{le=\"1\"} 1\n",
		"other 1\nother 1 2 \n",
		"sglang:num_queue_reqs{a=\"1\"} 1\nsglang:num_queue_reqs{a=\"1\",b=\"\"} 2",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAgainstReference(t, body)
	})
}
