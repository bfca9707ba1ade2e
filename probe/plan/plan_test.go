package plan

import (
	"regexp"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
)

func TestTemplate(t *testing.T) {
	temp, seed := 0.7, int64(3)
	tm := Template{Sampling: config.Sampling{Temperature: &temp, Seed: &seed, IgnoreEOS: true, MinTokens: 5}, Timeout: time.Minute}
	r := tm.Request(prompt.Prompt{Text: "a b c", OutputTokens: 9})
	if r.Prompt != "a b c" || r.MaxTokens != 9 || !r.IgnoreEOS || r.MinTokens != 5 || *r.Temperature != 0.7 || *r.Seed != 3 || r.Timeout != time.Minute || r.KeepText {
		t.Errorf("request %+v", r)
	}
	// A known answer keeps its text, sends no length extensions, and is
	// greedy unless the sampling says otherwise.
	k := Template{Sampling: config.Sampling{IgnoreEOS: true, MinTokens: 5}}.KnownAnswer("2+2=", 8)
	if k.Prompt != "2+2=" || k.MaxTokens != 8 || k.IgnoreEOS || k.MinTokens != 0 || !k.KeepText || k.Temperature == nil || *k.Temperature != 0 {
		t.Errorf("known answer %+v", k)
	}
	if k := tm.KnownAnswer("x", 1); *k.Temperature != 0.7 {
		t.Errorf("known answer temperature %v, want the sampling's", *k.Temperature)
	}
}

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		pattern *regexp.Regexp
		expect  string
		o       observation.Request
		want    string
	}{
		{regexp.MustCompile("(?i)paris"), "", observation.Request{Outcome: observation.Success, Text: " It is Paris."}, Pass},
		{nil, `\b4\b`, observation.Request{Outcome: observation.Success, Text: " five"}, Fail},
		{nil, "ok", observation.Request{Outcome: observation.HTTP5xx}, Error},
	} {
		if got := Judge(tc.pattern, tc.expect, &tc.o); got != tc.want {
			t.Errorf("Judge(%v, %q, %q) = %s, want %s", tc.pattern, tc.expect, tc.o.Text, got, tc.want)
		}
	}
}

func TestOpen(t *testing.T) {
	ol, err := Open(config.Arrival{Process: config.ProcessConstant, Rate: 4}, 1, DefaultDegradedLag)
	if err != nil {
		t.Fatal(err)
	}
	if ol.MaxRate != 4 || ol.Ceiling == nil {
		t.Fatalf("open loop %+v", ol)
	}
	first, _ := ol.Schedule.Next()
	second, _ := ol.Schedule.Next()
	if second-first != 250*time.Millisecond {
		t.Errorf("constant 4 req/s spaced %v", second-first)
	}
	if _, err := Open(config.Arrival{Process: config.ProcessConstant}, 1, DefaultDegradedLag); err == nil {
		t.Error("an arrival with no rate was planned")
	}
}
