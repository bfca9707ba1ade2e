package config

import (
	"strings"
	"testing"
)

// TestSchemaErrors: a mistake of form is reported with its YAML path, the
// form expected and, for a misspelt key, the nearest known one, never in
// Go's type names.
func TestSchemaErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"misspelt target key", strings.Replace(base, "model: m", "model: m\n    timout: 5s", 1),
			`c.yml:5: targets[0].timout: unknown field "timout"; did you mean timeout?`},
		{"integer duration", strings.Replace(base, "model: m", "model: m\n    timeout: 500", 1),
			`c.yml:5: targets[0].timeout: expected a duration such as 500ms, 30s or 5m (0 for none), got "500": write 500ms for milliseconds or 500s for seconds`},
		{"a word for a duration", base + "    duration: soon\n",
			`c.yml:10: workloads[0].duration: expected a duration such as 500ms, 30s or 5m (0 for none), got "soon"`},
		{"a word for a bool", base + "    sampling: {ignore_eos: yes please}\n",
			`c.yml:10: workloads[0].sampling.ignore_eos: expected true or false, got "yes please"`},
		{"a fraction for an integer", base + "    max_in_flight: 2.5\n",
			`c.yml:10: workloads[0].max_in_flight: expected a whole number, got "2.5"`},
		{"a mapping for a list", strings.Replace(base, "targets:\n  - name: local\n    url: http://127.0.0.1:8000\n    model: m\n", "targets: {name: local}\n", 1),
			`c.yml:1: targets: expected a list (- item lines, or [a, b]), got a mapping`},
		{"a list for a mapping", base + "    arrival: [1]\n",
			`workloads[0].arrival: expected a mapping`},
		{"a mapping for a number", strings.Replace(base, "rate: 1", "rate: {value: 1}", 1),
			`c.yml:9: workloads[0].arrival.rate: expected a number, got a mapping`},
		{"an unknown key far from any", base + "zzzzzz: 1\n",
			`c.yml:10: zzzzzz: unknown field "zzzzzz"; known here: modules, probe, targets, workloads`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "c.yml")
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "config.") || strings.Contains(err.Error(), "time.Duration") {
				t.Errorf("error %q names a Go type", err)
			}
		})
	}
}

// TestZeroDurations: a duration written 0 means none, as the README's
// example has it, and the rewrite that lets yaml.v3 take it moves no line:
// a later error keeps its line.
func TestZeroDurations(t *testing.T) {
	c, err := Parse([]byte(base+"    duration: 0\n    stall_threshold: 0\n"), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Workloads[0].Duration; d != 0 {
		t.Errorf("duration %v, want 0", d)
	}
	_, err = Parse([]byte(base+"    duration: 0\n    max_in_flight: -5\n"), "c.yml")
	if err == nil || !strings.Contains(err.Error(), "c.yml:11: workloads[0].max_in_flight") {
		t.Errorf("error %v, want one on line 11", err)
	}
}
