// Package live is the exporter's continuous probe: it turns a
// configuration's workloads into runners (Build: the open loop, a trace
// replay, multi-turn sessions, each a workload.Source), runs them and
// replaces them on reload (Manager), calibrates their prompts against the
// target's /tokenize (PromptMetrics), and records what every request did as
// the infer_probe_* series (Metrics, Series: the runners' Observer and
// Monitor).
package live
