package live

import (
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/sessions"
)

// agentBlock is an agent workload of jobs jobs, spaced by spacing, whose
// tools answer after latency with results of result words.
func agentBlock(jobs int, spacing, latency time.Duration, result, maxTurns int) string {
	return fmt.Sprintf(`    arrival: {process: constant, stages: [{rate: %g, duration: %v}]}
    sampling: {ignore_eos: true}
    tools: [{name: search, description: Searches.}]
    sessions:
      user_tokens: {dist: fixed, mean: 40}
      output_tokens: {dist: fixed, mean: 6}
      seed: 3
      agent:
        tool_latency: {dist: fixed, mean: %v}
        tool_result_tokens: {dist: fixed, mean: %d}
        max_turns: %d
`, float64(time.Second/spacing), time.Duration(jobs)*spacing, latency, result, maxTurns)
}

// observed is an observer's count and sum.
func observed(t *testing.T, o prometheus.Observer) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// TestAgentJobsGroundTruth runs agent jobs against the simulator playing a
// model that calls a tool twice, then answers (ToolTurns 2), with a fixed
// tool latency, and checks each job against the observations and the
// simulator: three turns, the second and third scheduled exactly the
// previous reply's end plus the latency, their prompts the conversation and
// the results to the token; the job duration series the sum of the turns'
// E2E and tool waits; TTFT by turn the observations' exactly.
func TestAgentJobsGroundTruth(t *testing.T) {
	const (
		jobs    = 6
		latency = 30 * time.Millisecond
		result  = 20
		calls   = 2 // the simulator's tool turns
	)
	cfg := simulatortest.InstantConfig()
	cfg.ToolTurns = calls
	sr := runSessions(t, cfg, "openai-chat", agentBlock(jobs, 40*time.Millisecond, latency, result, 8), nil)

	if n := testutil.ToFloat64(sr.agents.jobs[sessions.Completed]); n != jobs {
		t.Fatalf("%v jobs completed, want %d (ended: %v)", n, jobs, agentEnded(sr))
	}
	if len(sr.obs) != jobs*(calls+1) {
		t.Fatalf("%d requests, want %d", len(sr.obs), jobs*(calls+1))
	}
	convs := sr.conversations(latency)
	if len(convs) != jobs {
		t.Fatalf("%d jobs found in the observations, want %d", len(convs), jobs)
	}
	var wantSum float64
	ttft := make([][]float64, calls+1)
	for i, conv := range convs {
		if len(conv) != calls+1 {
			t.Fatalf("job %d has %d turns, want %d", i, len(conv), calls+1)
		}
		var parts time.Duration
		for k, o := range conv {
			if o.Outcome != observation.Success {
				t.Fatalf("job %d turn %d: %s", i, k+1, o.Outcome)
			}
			if wantCall := k < calls; (len(o.Calls) > 0) != wantCall {
				t.Errorf("job %d turn %d: %d calls, want a call %v", i, k+1, len(o.Calls), wantCall)
			}
			rec, ok := sr.sim.PrefixRecord(fmt.Sprintf("chat-%d", o.Seq))
			if !ok {
				t.Fatalf("job %d turn %d: no ground truth for request %d", i, k+1, o.Seq)
			}
			// The simulator's template: the previous generation prompt
			// gives way to the assistant's message, whose content is null
			// (-1 + 3), the tool message is its words and 3, and a new
			// generation prompt follows (+1).
			if k > 0 {
				prev, _ := sr.sim.PrefixRecord(fmt.Sprintf("chat-%d", conv[k-1].Seq))
				if want := prev.PromptTokens + 6 + result; rec.PromptTokens != want {
					t.Errorf("job %d turn %d: %d prompt tokens, want %d (the previous turn's %d, the call and its result)", i, k+1, rec.PromptTokens, want, prev.PromptTokens)
				}
				parts += latency
			}
			parts += o.End.Sub(o.Scheduled) // E2E
			d, ok := o.TTFT()
			if !ok {
				t.Fatalf("job %d turn %d: no TTFT", i, k+1)
			}
			ttft[k] = append(ttft[k], d.Seconds())
		}
		dur := conv[len(conv)-1].End.Sub(conv[0].Scheduled)
		if math.Abs(float64(dur-parts)) > 0.01*float64(parts) {
			t.Errorf("job %d: %v from its first turn's instant to its last reply's end, its turns' E2E and tool waits %v", i, dur, parts)
		}
		wantSum += parts.Seconds()
	}
	n, sum := observed(t, sr.agents.duration)
	if n != jobs || math.Abs(sum-wantSum) > 0.01*wantSum {
		t.Errorf("job duration series: %d jobs, %v s; want %d, %v s (the turns' E2E and tool waits)", n, sum, jobs, wantSum)
	}
	if n, sum := observed(t, sr.agents.tool); n != jobs || math.Abs(sum-float64(jobs*calls)*latency.Seconds()) > 1e-9 {
		t.Errorf("job tool time series: %d jobs, %v s; want %d, %v s", n, sum, jobs, float64(jobs*calls)*latency.Seconds())
	}
	if n, sum := observed(t, sr.agents.turns); n != jobs || sum != jobs*(calls+1) {
		t.Errorf("job turns series: %d jobs, %v turns; want %d, %d", n, sum, jobs, jobs*(calls+1))
	}
	if n := testutil.ToFloat64(sr.agents.toolCalls); n != jobs*calls {
		t.Errorf("%v tool calls counted, want %d", n, jobs*calls)
	}
	for k, want := range ttft {
		sort.Float64s(want)
		var s float64
		for _, x := range want {
			s += x
		}
		if n, sum := observed(t, sr.sessions.ttft[k]); n != uint64(len(want)) || math.Abs(sum-s) > 1e-9 {
			t.Errorf("turn %d TTFT series: %d, %v s; the observations %d, %v s", k+1, n, sum, len(want), s)
		}
	}
}

// TestAgentJobsTurnLimit: a model that keeps calling tools is stopped at
// max_turns, and the jobs end turn_limit.
func TestAgentJobsTurnLimit(t *testing.T) {
	const jobs, maxTurns = 3, 2
	cfg := simulatortest.InstantConfig()
	cfg.ToolTurns = 5
	sr := runSessions(t, cfg, "openai-chat", agentBlock(jobs, 40*time.Millisecond, 5*time.Millisecond, 4, maxTurns), nil)
	if n := testutil.ToFloat64(sr.agents.jobs[sessions.TurnLimit]); n != jobs {
		t.Fatalf("%v jobs ended at the turn limit, want %d (ended: %v)", n, jobs, agentEnded(sr))
	}
	if len(sr.obs) != jobs*maxTurns {
		t.Errorf("%d requests, want %d", len(sr.obs), jobs*maxTurns)
	}
	if n := testutil.ToFloat64(sr.sessions.ended[sessions.Completed]); n != jobs {
		t.Errorf("%v sessions completed, want %d: a job at its turn limit answered every turn it could", n, jobs)
	}
	if n, sum := observed(t, sr.agents.turns); n != jobs || sum != jobs*maxTurns {
		t.Errorf("job turns series: %d jobs, %v turns; want %d, %d", n, sum, jobs, jobs*maxTurns)
	}
}

// agentEnded is the jobs ended by reason.
func agentEnded(sr sessionRun) map[string]float64 {
	out := map[string]float64{}
	for _, r := range sessions.JobEndReasons {
		out[r] = testutil.ToFloat64(sr.agents.jobs[r])
	}
	return out
}
