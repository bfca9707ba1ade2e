package bench

import (
	"testing"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestSchemaOutcomeNames: the report names a success and a dropped
// arrival as the observation does.
func TestSchemaOutcomeNames(t *testing.T) {
	if report.OutcomeSuccess != string(observation.Success) {
		t.Errorf("report.OutcomeSuccess %q, observation.Success %q", report.OutcomeSuccess, observation.Success)
	}
	if report.OutcomeDropped != string(observation.Dropped) {
		t.Errorf("report.OutcomeDropped %q, observation.Dropped %q", report.OutcomeDropped, observation.Dropped)
	}
}
