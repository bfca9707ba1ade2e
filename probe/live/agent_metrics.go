package live

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/probe/sessions"
)

// Bucket layouts of the agent series.
var (
	// A job's duration: a few turns and tool waits, up to max_turns of
	// each (config.MaxSessionTurns turns, tool latencies up to an hour).
	jobDurationBuckets = []float64{.1, .25, .5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200, 1800, 3600}
	// A turn's tool wait: a lookup's milliseconds to a build's minutes.
	toolWaitBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
)

// agentMetrics are the infer_probe_agent_* vectors: only agent workloads
// (a sessions block with agent) have series in them. Their turns are in the
// session series too (TTFT by turn, prompt tokens by turn).
type agentMetrics struct {
	jobs                            *prometheus.CounterVec
	toolCalls                       *prometheus.CounterVec
	duration, turns, toolWait, tool *prometheus.HistogramVec
}

func newAgentMetrics(reg prometheus.Registerer) *agentMetrics {
	hist := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(nativeHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}), labels)
	}
	m := &agentMetrics{
		jobs: counterVec("agent_jobs_total",
			"Agent jobs ended, by reason: completed (answered without a tool call), turn_limit, context_limit, turn_failed, turn_dropped or stopped.", with(labels, "reason")),
		toolCalls: counterVec("agent_tool_calls_total", "Tool calls of agent jobs answered by the simulated tools.", labels),
		duration: hist("agent_job_duration_seconds",
			"Agent job duration, from its first turn's scheduled instant to its last reply's end: every turn's E2E and tool wait.", jobDurationBuckets),
		turns:    hist("agent_job_turns", "Turns an agent job had answered successfully, observed when it ends.", sessionTurnBuckets),
		toolWait: hist("agent_tool_wait_seconds", "Per turn that called tools, the wait for their results: the slowest parallel call's drawn latency.", toolWaitBuckets),
		tool:     hist("agent_job_tool_seconds", "Per agent job, the sum of its tool waits.", jobDurationBuckets),
	}
	reg.MustRegister(m.jobs, m.toolCalls, m.duration, m.turns, m.toolWait, m.tool)
	return m
}

func (m *agentMetrics) delete(match prometheus.Labels) {
	deleteMatching(match, m.jobs, m.toolCalls, m.duration, m.turns, m.toolWait, m.tool)
}

// agentSeries is one agent workload's view of the agent metrics, every
// series created at zero: its sessions.JobRecorder.
type agentSeries struct {
	jobs                            map[string]prometheus.Counter
	toolCalls                       prometheus.Counter
	duration, turns, toolWait, tool prometheus.Observer
}

// series binds the labels of one workload (target, model, workload).
func (m *agentMetrics) series(lv []string) *agentSeries {
	s := &agentSeries{
		jobs:      map[string]prometheus.Counter{},
		toolCalls: m.toolCalls.WithLabelValues(lv...),
		duration:  m.duration.WithLabelValues(lv...),
		turns:     m.turns.WithLabelValues(lv...),
		toolWait:  m.toolWait.WithLabelValues(lv...),
		tool:      m.tool.WithLabelValues(lv...),
	}
	for _, r := range sessions.JobEndReasons {
		s.jobs[r] = m.jobs.WithLabelValues(with(lv, r)...)
	}
	return s
}

// ToolWait implements sessions.JobRecorder.
func (s *agentSeries) ToolWait(calls int, d time.Duration) {
	s.toolCalls.Add(float64(calls))
	s.toolWait.Observe(d.Seconds())
}

// JobEnded implements sessions.JobRecorder. A job that sent no turn has no
// duration to observe.
func (s *agentSeries) JobEnded(j sessions.Job) {
	s.jobs[j.Reason].Inc()
	s.turns.Observe(float64(j.Turns))
	s.tool.Observe(j.ToolTime.Seconds())
	if j.Duration > 0 {
		s.duration.Observe(j.Duration.Seconds())
	}
}
