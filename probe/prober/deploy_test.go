package prober

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// The deploy/ examples are run under a real Prometheus by the end-to-end
// tests; these checks keep them parseable, in the blackbox relabelling
// shape, and consistent with what /probe accepts.

type scrapeFile struct {
	ScrapeConfigs []struct {
		JobName        string              `yaml:"job_name"`
		MetricsPath    string              `yaml:"metrics_path"`
		Params         map[string][]string `yaml:"params"`
		ScrapeInterval string              `yaml:"scrape_interval"`
		ScrapeTimeout  string              `yaml:"scrape_timeout"`
		StaticConfigs  []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
		RelabelConfigs []struct {
			SourceLabels []string `yaml:"source_labels"`
			TargetLabel  string   `yaml:"target_label"`
			Replacement  string   `yaml:"replacement"`
		} `yaml:"relabel_configs"`
	} `yaml:"scrape_configs"`
}

type probeResource struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		JobName       string `yaml:"jobName"`
		Interval      string `yaml:"interval"`
		ScrapeTimeout string `yaml:"scrapeTimeout"`
		Module        string `yaml:"module"`
		Prober        struct {
			URL    string `yaml:"url"`
			Path   string `yaml:"path"`
			Scheme string `yaml:"scheme"`
		} `yaml:"prober"`
		Targets struct {
			StaticConfig struct {
				Static []string          `yaml:"static"`
				Labels map[string]string `yaml:"labels"`
			} `yaml:"staticConfig"`
		} `yaml:"targets"`
	} `yaml:"spec"`
}

func decodeStrict(t *testing.T, file string, v any) []byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // a misspelt field fails here, not in Prometheus
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return data
}

// commentedConfig extracts the exporter configuration quoted in a file's
// comments (the lines starting "#   ") and loads it, so that the example
// the file tells users to write is valid.
func commentedConfig(t *testing.T, data []byte) *config.Config {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "#   "); ok {
			b.WriteString(rest + "\n")
		}
	}
	c, err := config.Parse([]byte(b.String()), "quoted config")
	if err != nil {
		t.Fatalf("the configuration quoted in the comments does not load: %v\n%s", err, b.String())
	}
	return c
}

func TestDeployScrapeConfig(t *testing.T) {
	var f scrapeFile
	data := decodeStrict(t, filepath.Join("..", "..", "deploy", "prometheus", "probe-scrape-config.yml"), &f)
	if len(f.ScrapeConfigs) != 1 {
		t.Fatalf("%d scrape configs", len(f.ScrapeConfigs))
	}
	sc := f.ScrapeConfigs[0]
	if sc.MetricsPath != "/probe" || len(sc.Params["module"]) != 1 {
		t.Errorf("metrics_path %q, params %v", sc.MetricsPath, sc.Params)
	}
	rl := sc.RelabelConfigs
	if len(rl) != 3 ||
		strings.Join(rl[0].SourceLabels, ",") != "__address__" || rl[0].TargetLabel != "__param_target" ||
		strings.Join(rl[1].SourceLabels, ",") != "__param_target" || rl[1].TargetLabel != "instance" ||
		rl[2].TargetLabel != "__address__" || rl[2].Replacement == "" {
		t.Errorf("relabelling is not blackbox's: %+v", rl)
	}
	c := commentedConfig(t, data)
	if _, ok := c.Module(sc.Params["module"][0]); !ok {
		t.Errorf("module %q is not in the quoted configuration", sc.Params["module"][0])
	}
	pol := newPolicy(c)
	for _, st := range sc.StaticConfigs {
		for _, target := range st.Targets {
			if _, r := pol.check(target); r != nil {
				t.Errorf("target %s would be refused: %v", target, r)
			}
		}
	}
}

func TestDeployProbeResource(t *testing.T) {
	var p probeResource
	data := decodeStrict(t, filepath.Join("..", "..", "deploy", "kubernetes", "probe.yaml"), &p)
	if p.APIVersion != "monitoring.coreos.com/v1" || p.Kind != "Probe" {
		t.Errorf("not a Probe: %s %s", p.APIVersion, p.Kind)
	}
	if u := p.Spec.Prober.URL; u == "" || strings.Contains(u, "://") {
		t.Errorf("prober.url %q must be host:port", u)
	}
	if p.Spec.Prober.Path != "/probe" || p.Spec.Module == "" || len(p.Spec.Targets.StaticConfig.Static) == 0 {
		t.Errorf("spec = %+v", p.Spec)
	}
	c := commentedConfig(t, data)
	if _, ok := c.Module(p.Spec.Module); !ok {
		t.Errorf("module %q is not in the quoted configuration", p.Spec.Module)
	}
	pol := newPolicy(c)
	for _, target := range p.Spec.Targets.StaticConfig.Static {
		if _, r := pol.check(target); r != nil {
			t.Errorf("target %s would be refused: %v", target, r)
		}
	}
}
