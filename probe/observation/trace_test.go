package observation

import (
	"strings"
	"testing"
)

func TestTraceparent(t *testing.T) {
	id := [16]byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	span := [8]byte{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	for _, tc := range []struct {
		name  string
		tr    Trace
		want  string
		valid bool
	}{
		// The W3C Trace Context specification's own example.
		{"sampled", Trace{TraceID: id, SpanID: span, Sampled: true}, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"not sampled", Trace{TraceID: id, SpanID: span}, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		{"zero span id", Trace{TraceID: id}, "", false},
		{"zero", Trace{}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tr.Valid() != tc.valid {
				t.Errorf("Valid = %v, want %v", tc.tr.Valid(), tc.valid)
			}
			if !tc.valid {
				return
			}
			if got := tc.tr.Traceparent(); got != tc.want || len(got) != TraceparentLen {
				t.Errorf("Traceparent = %q, want %q", got, tc.want)
			}
			// The exemplars' ids are the traceparent's, digit for digit.
			traceID, spanID := tc.tr.IDs()
			if want := "00-" + traceID + "-" + spanID + "-"; !strings.HasPrefix(tc.want, want) || len(traceID) != 32 || len(spanID) != 16 {
				t.Errorf("IDs = %q, %q; traceparent %q", traceID, spanID, tc.want)
			}
		})
	}
}
