package workload

import "github.com/infer-exporter/infer_exporter/probe/plan"

// Workload states, the values of infer_probe_workload_state's state label.
const (
	// StateCalibrating: the workload is building its prompts (calibrating
	// them against the server's /tokenize); it sends nothing yet.
	StateCalibrating = "calibrating"
	// StateRunning: the workload is sending its schedule.
	StateRunning = "running"
	// StateFinished: the schedule or the duration ended.
	StateFinished = "finished"
	// StateFailed: the workload could not start (its calibration failed).
	StateFailed = "failed"
)

// States lists every workload state.
var States = []string{StateCalibrating, StateRunning, StateFinished, StateFailed}

// Results of a known-answer check, the values of the result label.
const (
	CheckPass  = plan.Pass
	CheckFail  = plan.Fail
	CheckError = plan.Error
)
