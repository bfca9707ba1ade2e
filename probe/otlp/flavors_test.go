package otlp

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// TestEveryFlavorHasNames: a workload of every flavor the configuration
// accepts pushes the operation and provider names its facts give, never
// empty ones; TestAttributes pins the values.
func TestEveryFlavorHasNames(t *testing.T) {
	for _, f := range config.AllFlavors() {
		t.Run(string(f.Name), func(t *testing.T) {
			op := operationName(f)
			if op != "chat" && op != "text_completion" {
				t.Fatalf("operation %q", op)
			}
			if f.Provider == "" {
				t.Fatal("no provider name")
			}
			p, reader := newTestPusher(t, Exponential)
			target := config.Target{Name: "t", URL: "http://h:1", Flavor: f.Name, Model: "m"}
			o := p.Workload(&target, &config.Workload{Name: "w"})
			play(o, requests[0])
			ps := points(collect(t, reader)[NameOperationDuration])
			if len(ps) == 0 {
				t.Fatal("no points")
			}
			for _, pt := range ps {
				for k, want := range map[attribute.Key]string{"gen_ai.operation.name": op, "gen_ai.provider.name": f.Provider} {
					if got, ok := pt.attrs.Value(k); !ok || got.AsString() != want {
						t.Errorf("%s = %q, want %q", k, got.AsString(), want)
					}
				}
			}
		})
	}
}

// TestUnknownFlavorPanics: a target whose flavor the configuration would
// refuse gets no made-up names.
func TestUnknownFlavorPanics(t *testing.T) {
	defer func() {
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, `flavor "vllm-native"`) {
			t.Errorf("recovered %v, want a panic naming the flavor", r)
		}
	}()
	p, _ := newTestPusher(t, Exponential)
	p.Workload(&config.Target{Name: "t", URL: "http://h:1", Flavor: "vllm-native", Model: "m"}, &config.Workload{Name: "w"})
}
