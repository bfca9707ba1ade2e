package client

import "github.com/infer-exporter/infer_exporter/internal/config"

// TargetOf converts a configured target into the client's view of it: the
// one conversion, for the live workloads (probe/live), the quality probe and the bench.
func TargetOf(t *config.Target) (*Target, error) {
	flavor, err := ParseFlavor(string(t.Flavor))
	if err != nil {
		return nil, err
	}
	return &Target{
		Name:        t.Name,
		BaseURL:     t.URL,
		Model:       t.Model,
		Flavor:      flavor,
		BearerToken: string(t.BearerToken),
		Headers:     t.Headers,
	}, nil
}
