package otlp

import "testing"

// TestTraceContexts: without spans pushed, each request still gets a
// valid trace context, its sampled flag at the ratio resolved as when spans
// are pushed; a ratio out of range is refused.
func TestTraceContexts(t *testing.T) {
	const draws = 5000
	ratio := func(r float64) *float64 { return &r }
	for _, tc := range []struct {
		name        string
		opts        Options
		wantSampled func(n int) bool
		wantErr     bool
	}{
		{"ratio 0", Options{SampleRatio: ratio(0)}, func(n int) bool { return n == 0 }, false},
		{"ratio 1", Options{SampleRatio: ratio(1)}, func(n int) bool { return n == draws }, false},
		{"default 0.01", Options{Getenv: func(string) string { return "" }}, func(n int) bool { return n > 0 && n < 100 }, false}, // mean 50; outside: p < 1e-9
		{"always_off from the environment", Options{Getenv: func(k string) string {
			if k == envSampler {
				return "always_off"
			}
			return ""
		}}, func(n int) bool { return n == 0 }, false},
		{"ratio 2", Options{SampleRatio: ratio(2)}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tracer, err := TraceContexts(tc.opts)
			if tc.wantErr {
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for range draws {
				tr := tracer.Trace()
				if !tr.Valid() {
					t.Fatalf("invalid trace context %v", tr)
				}
				if tr.Sampled {
					n++
				}
			}
			if !tc.wantSampled(n) {
				t.Errorf("%d of %d sampled", n, draws)
			}
		})
	}
	if tr := (ProbeTraceContexts{}).Trace(); !tr.Valid() || !tr.Sampled {
		t.Errorf("a probe's trace context %v: want valid and sampled", tr)
	}
}
