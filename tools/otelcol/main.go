// Command otelcol is the OpenTelemetry Collector of the end-to-end test of
// the OTLP push (e2e/otlp_test.go): the collector's own service with only
// the components that test needs, the OTLP receiver and the file exporter,
// so that what the exporter pushes arrives through a real collector and is
// read back as the collector's JSON. It is built from the collector's Go
// modules pinned in this directory's go.mod, like tools/prometheus, and
// run through `go -C tools/otelcol tool otelcol`.
package main

import (
	"fmt"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

// version is the collector release whose modules go.mod pins.
const version = "v0.165.0"

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol",
			Description: "OpenTelemetry Collector with the OTLP receiver and the file exporter, for infer_exporter's tests",
			Version:     version,
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				// Configuration comes from files only (--config=FILE).
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				DefaultScheme:     "file",
			},
		},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "otelcol:", err)
		os.Exit(1)
	}
}

// components are the factories of the only components this collector has.
func components() (otelcol.Factories, error) {
	receivers, err := otelcol.MakeFactoryMap(otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	exporters, err := otelcol.MakeFactoryMap(fileexporter.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	return otelcol.Factories{
		Receivers: receivers,
		Exporters: exporters,
		// The service's own telemetry (its logs; the test's configuration
		// turns its metrics off).
		Telemetry: otelconftelemetry.NewFactory(),
	}, nil
}
